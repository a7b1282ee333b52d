"""Tools of the pharmacy environment: patients, prescriptions, refills, pharmacies, stock and orders."""

from __future__ import annotations

import math
from datetime import date, timedelta
from typing import Literal

from pydantic import BaseModel, Field

from arena.env import Db, ToolError, tool

DELIVERY_FEE = 4.99
EARLY_REFILL_FRACTION = 0.75


class OrderLine(BaseModel):
    """One line of an over-the-counter order."""

    medication_id: str = Field(description='An over-the-counter medication id, e.g. "MED-16".')
    quantity: int = Field(1, description="How many packages, 1 to 10.")


def _own_rx(db: Db, rx_id: str) -> dict:
    rx = db.one(
        "SELECT r.*, p.name AS patient_name, m.name AS med_name, m.strength, m.controlled_schedule, m.unit_price "
        "FROM prescriptions r JOIN patients p ON p.patient_id = r.patient_id "
        "JOIN medications m ON m.medication_id = r.medication_id WHERE r.rx_id = ? AND p.user_id = ?",
        rx_id,
        db.user_id,
    )
    if rx is None:
        raise ToolError(f"no prescription {rx_id} for the patients on your account")
    return rx


def _next_refill_date(rx: dict) -> str | None:
    if not rx["last_filled_on"]:
        return None
    days = math.ceil(rx["days_supply"] * EARLY_REFILL_FRACTION)
    return (date.fromisoformat(rx["last_filled_on"]) + timedelta(days=days)).isoformat()


def _refill_problem(db: Db, rx: dict) -> str | None:
    """Why this prescription cannot be refilled today, or None."""
    label = f"{rx['rx_id']} ({rx['med_name']} {rx['strength']})"
    if rx["status"] != "active":
        return f"{label} is {rx['status'].replace('_', ' ')}"
    if rx["controlled_schedule"] == 2:
        return f"{label} is a Schedule II controlled medication; it cannot be refilled, a new prescription is needed"
    if rx["expires_on"] < db.today():
        return f"{label} expired on {rx['expires_on']}; a new prescription from {rx['prescriber']} is needed"
    if rx["refills_remaining"] <= 0:
        return f"{label} has no refills remaining; ask {rx['prescriber']} for a new prescription"
    open_refill = db.one(
        "SELECT refill_id, status FROM refills WHERE rx_id = ? AND status IN ('requested', 'ready')",
        rx["rx_id"],
    )
    if open_refill:
        return f"{label} already has refill {open_refill['refill_id']} {open_refill['status']}"
    earliest = _next_refill_date(rx)
    if earliest and earliest > db.today():
        return f"{label} is too early to refill; the earliest refill date is {earliest}"
    return None


def _pharmacy(db: Db, pharmacy_id: str) -> dict:
    ph = db.one("SELECT * FROM pharmacies WHERE pharmacy_id = ?", pharmacy_id)
    if ph is None:
        raise ToolError(f"no pharmacy {pharmacy_id}")
    return ph


def _stock(db: Db, pharmacy_id: str, medication_id: str) -> int:
    row = db.one(
        "SELECT quantity FROM stock WHERE pharmacy_id = ? AND medication_id = ?", pharmacy_id, medication_id
    )
    return row["quantity"] if row else 0


@tool
def list_patients(db: Db) -> dict:
    """List the patients managed by this account (the user and family members), with allergies."""
    rows = db.all(
        "SELECT patient_id, name, date_of_birth, relation, allergies FROM patients WHERE user_id = ? ORDER BY patient_id",
        db.user_id,
    )
    return {"patients": rows, "count": len(rows)}


@tool
def list_prescriptions(db: Db, patient_id: str = "", status: str = "") -> dict:
    """List prescriptions of the account's patients with refill counts and expiry dates.

    Args:
        patient_id: Only this patient, e.g. "PT-2"; empty for everyone on the account.
        status: active, on_hold or cancelled; empty for all.
    """
    if (
        patient_id
        and db.one("SELECT 1 FROM patients WHERE patient_id = ? AND user_id = ?", patient_id, db.user_id)
        is None
    ):
        raise ToolError(f"no patient {patient_id} on your account")
    sql = (
        "SELECT r.rx_id, p.name AS patient, m.name AS medication, m.generic_name, m.strength, r.directions, "
        "r.refills_remaining, r.last_filled_on, r.expires_on, r.status, r.pharmacy_id FROM prescriptions r "
        "JOIN patients p ON p.patient_id = r.patient_id JOIN medications m ON m.medication_id = r.medication_id "
        "WHERE p.user_id = ?"
    )
    params: list = [db.user_id]
    if patient_id:
        sql += " AND r.patient_id = ?"
        params.append(patient_id)
    if status:
        sql += " AND r.status = ?"
        params.append(status)
    rows = db.all(sql + " ORDER BY r.rx_id", *params)
    return {"prescriptions": rows, "count": len(rows)}


@tool
def get_prescription(db: Db, rx_id: str) -> dict:
    """Get a prescription with its refill eligibility, earliest refill date and refill history.

    Args:
        rx_id: The prescription, e.g. "RX-1001".
    """
    rx = _own_rx(db, rx_id)
    problem = _refill_problem(db, rx)
    ph = db.one("SELECT name FROM pharmacies WHERE pharmacy_id = ?", rx["pharmacy_id"])
    history = db.all(
        "SELECT refill_id, pharmacy_id, quantity, copay, status, requested_at FROM refills WHERE rx_id = ? ORDER BY requested_at DESC",
        rx_id,
    )
    return {
        "rx_id": rx_id,
        "patient": rx["patient_name"],
        "medication": f"{rx['med_name']} {rx['strength']}",
        "medication_id": rx["medication_id"],
        "directions": rx["directions"],
        "prescriber": rx["prescriber"],
        "quantity": rx["quantity"],
        "days_supply": rx["days_supply"],
        "refills_remaining": rx["refills_remaining"],
        "last_filled_on": rx["last_filled_on"],
        "next_refill_date": _next_refill_date(rx),
        "expires_on": rx["expires_on"],
        "status": rx["status"],
        "pharmacy_id": rx["pharmacy_id"],
        "pharmacy": ph["name"] if ph else None,
        "refill_eligible": problem is None,
        "refill_blocked_because": problem,
        "refills": history,
    }


@tool
def search_medications(db: Db, query: str, otc_only: bool = False) -> dict:
    """Search medications by brand or generic name.

    Args:
        query: Part of the brand or generic name, e.g. "cetirizine".
        otc_only: Only over-the-counter medications (no prescription needed).
    """
    if not query.strip():
        raise ToolError("query must not be empty")
    like = f"%{query.strip()}%"
    sql = (
        "SELECT medication_id, name, generic_name, strength, form, requires_rx, controlled_schedule, unit_price "
        "FROM medications WHERE (name LIKE ? OR generic_name LIKE ?)"
    )
    if otc_only:
        sql += " AND requires_rx = 0"
    rows = db.all(sql + " ORDER BY name, strength", like, like)
    for r in rows:
        r["requires_rx"] = bool(r["requires_rx"])
    return {"medications": rows, "count": len(rows)}


@tool
def find_pharmacies(
    db: Db,
    query: str = "",
    city: str = "",
    medication_id: str = "",
    min_quantity: int = 1,
    delivers_only: bool = False,
) -> dict:
    """Find pharmacies by name or city, optionally only those with a medication in stock.

    Args:
        query: Part of the pharmacy name, e.g. "Fremont".
        city: City, e.g. "Seattle".
        medication_id: Only pharmacies stocking at least min_quantity of this medication; the stock is shown.
        min_quantity: Units needed when medication_id is given.
        delivers_only: Only pharmacies that deliver.
    """
    sql = "SELECT ph.pharmacy_id, ph.name, ph.street, ph.city, ph.opens, ph.closes, ph.delivers"
    params: list = []
    if medication_id:
        if db.one("SELECT 1 FROM medications WHERE medication_id = ?", medication_id) is None:
            raise ToolError(f"no medication {medication_id}")
        sql += ", COALESCE(s.quantity, 0) AS in_stock FROM pharmacies ph LEFT JOIN stock s ON s.pharmacy_id = ph.pharmacy_id AND s.medication_id = ? WHERE COALESCE(s.quantity, 0) >= ?"
        params += [medication_id, min_quantity]
    else:
        sql += " FROM pharmacies ph WHERE 1=1"
    if query.strip():
        sql += " AND ph.name LIKE ?"
        params.append(f"%{query.strip()}%")
    if city.strip():
        sql += " AND ph.city LIKE ?"
        params.append(city.strip())
    if delivers_only:
        sql += " AND ph.delivers = 1"
    rows = db.all(sql + " ORDER BY ph.name", *params)
    for r in rows:
        r["delivers"] = bool(r["delivers"])
    preferred = db.one("SELECT preferred_pharmacy_id FROM users WHERE id = ?", db.user_id)
    return {
        "pharmacies": rows,
        "count": len(rows),
        "preferred_pharmacy_id": preferred["preferred_pharmacy_id"] if preferred else None,
    }


@tool
def list_refills(db: Db, status: str = "") -> dict:
    """List refills for the account's patients, newest first.

    Args:
        status: requested, ready, picked_up or cancelled; empty for all.
    """
    sql = (
        "SELECT f.refill_id, f.rx_id, p.name AS patient, m.name AS medication, m.strength, f.pharmacy_id, f.quantity, "
        "f.copay, f.status, f.requested_at FROM refills f JOIN prescriptions r ON r.rx_id = f.rx_id "
        "JOIN patients p ON p.patient_id = r.patient_id JOIN medications m ON m.medication_id = r.medication_id "
        "WHERE p.user_id = ?"
    )
    params: list = [db.user_id]
    if status:
        sql += " AND f.status = ?"
        params.append(status)
    rows = db.all(sql + " ORDER BY f.requested_at DESC, f.refill_id DESC", *params)
    return {"refills": rows, "count": len(rows)}


@tool(writes=True)
def request_refill(db: Db, rx_id: str) -> dict:
    """Request a refill of a prescription at the pharmacy that holds it.

    Args:
        rx_id: The prescription, e.g. "RX-1001".
    """
    rx = _own_rx(db, rx_id)
    problem = _refill_problem(db, rx)
    if problem:
        raise ToolError(problem)
    ph = _pharmacy(db, rx["pharmacy_id"])
    have = _stock(db, rx["pharmacy_id"], rx["medication_id"])
    if have < rx["quantity"]:
        raise ToolError(
            f"{ph['name']} has {have} of {rx['med_name']} {rx['strength']} in stock, {rx['quantity']} needed; "
            "transfer the prescription to a pharmacy that has it"
        )
    refill_id = db.new_id("RF")
    copay = round(min(rx["unit_price"] * rx["quantity"] * 0.2, 15.0), 2)
    db.execute(
        "INSERT INTO refills (refill_id, rx_id, pharmacy_id, quantity, copay, status, requested_at) VALUES (?, ?, ?, ?, ?, 'requested', ?)",
        refill_id,
        rx_id,
        rx["pharmacy_id"],
        rx["quantity"],
        copay,
        db.now(),
    )
    db.execute(
        "UPDATE stock SET quantity = quantity - ? WHERE pharmacy_id = ? AND medication_id = ?",
        rx["quantity"],
        rx["pharmacy_id"],
        rx["medication_id"],
    )
    db.execute(
        "UPDATE prescriptions SET refills_remaining = refills_remaining - 1, last_filled_on = ? WHERE rx_id = ?",
        db.today(),
        rx_id,
    )
    return {
        "refill_id": refill_id,
        "rx_id": rx_id,
        "status": "requested",
        "pharmacy": ph["name"],
        "quantity": rx["quantity"],
        "copay": copay,
        "refills_remaining": rx["refills_remaining"] - 1,
    }


@tool(writes=True)
def cancel_refill(db: Db, refill_id: str) -> dict:
    """Cancel a refill that has not been picked up; the refill is credited back to the prescription.

    Args:
        refill_id: The refill, e.g. "RF-2100".
    """
    f = db.one(
        "SELECT f.*, r.medication_id, r.last_filled_on FROM refills f JOIN prescriptions r ON r.rx_id = f.rx_id "
        "JOIN patients p ON p.patient_id = r.patient_id WHERE f.refill_id = ? AND p.user_id = ?",
        refill_id,
        db.user_id,
    )
    if f is None:
        raise ToolError(f"no refill {refill_id} for the patients on your account")
    if f["status"] not in ("requested", "ready"):
        raise ToolError(f"refill {refill_id} is {f['status'].replace('_', ' ')} and cannot be cancelled")
    previous = db.one(
        "SELECT substr(MAX(requested_at), 1, 10) AS d FROM refills WHERE rx_id = ? AND status = 'picked_up'",
        f["rx_id"],
    )["d"]
    db.execute("UPDATE refills SET status = 'cancelled' WHERE refill_id = ?", refill_id)
    db.execute(
        "UPDATE stock SET quantity = quantity + ? WHERE pharmacy_id = ? AND medication_id = ?",
        f["quantity"],
        f["pharmacy_id"],
        f["medication_id"],
    )
    db.execute(
        "UPDATE prescriptions SET refills_remaining = refills_remaining + 1, last_filled_on = COALESCE(?, last_filled_on) WHERE rx_id = ?",
        previous,
        f["rx_id"],
    )
    return {"refill_id": refill_id, "rx_id": f["rx_id"], "status": "cancelled"}


@tool(writes=True)
def transfer_prescription(db: Db, rx_id: str, pharmacy_id: str) -> dict:
    """Move a prescription (and its remaining refills) to another pharmacy.

    Args:
        rx_id: The prescription, e.g. "RX-1005".
        pharmacy_id: The pharmacy to move it to, e.g. "PH-01".
    """
    rx = _own_rx(db, rx_id)
    ph = _pharmacy(db, pharmacy_id)
    if rx["status"] != "active":
        raise ToolError(f"{rx_id} is {rx['status'].replace('_', ' ')} and cannot be transferred")
    if rx["controlled_schedule"] == 2:
        raise ToolError(f"{rx_id} is a Schedule II controlled medication and cannot be transferred")
    if rx["expires_on"] < db.today():
        raise ToolError(f"{rx_id} expired on {rx['expires_on']} and cannot be transferred")
    if rx["pharmacy_id"] == pharmacy_id:
        raise ToolError(f"{rx_id} is already at {ph['name']}")
    if db.one("SELECT 1 FROM refills WHERE rx_id = ? AND status IN ('requested', 'ready')", rx_id):
        raise ToolError(f"{rx_id} has an open refill; cancel or pick it up before transferring")
    db.execute("UPDATE prescriptions SET pharmacy_id = ? WHERE rx_id = ?", pharmacy_id, rx_id)
    return {
        "rx_id": rx_id,
        "pharmacy_id": pharmacy_id,
        "pharmacy": ph["name"],
        "in_stock": _stock(db, pharmacy_id, rx["medication_id"]),
    }


@tool(writes=True)
def set_preferred_pharmacy(db: Db, pharmacy_id: str) -> dict:
    """Set the account's preferred pharmacy (used for new prescriptions; existing ones stay where they are).

    Args:
        pharmacy_id: The pharmacy, e.g. "PH-05".
    """
    ph = _pharmacy(db, pharmacy_id)
    current = db.one("SELECT preferred_pharmacy_id FROM users WHERE id = ?", db.user_id)
    if current and current["preferred_pharmacy_id"] == pharmacy_id:
        raise ToolError(f"{ph['name']} is already your preferred pharmacy")
    db.execute("UPDATE users SET preferred_pharmacy_id = ? WHERE id = ?", pharmacy_id, db.user_id)
    return {"preferred_pharmacy_id": pharmacy_id, "name": ph["name"]}


@tool(writes=True)
def place_otc_order(
    db: Db, pharmacy_id: str, items: list[OrderLine], fulfillment: Literal["pickup", "delivery"] = "pickup"
) -> dict:
    """Order over-the-counter medications for pickup or home delivery (delivery fee 4.99).

    Args:
        pharmacy_id: The pharmacy, e.g. "PH-05".
        items: The medications and quantities.
        fulfillment: pickup or delivery.
    """
    ph = _pharmacy(db, pharmacy_id)
    if not items:
        raise ToolError("an order needs at least one item")
    if fulfillment == "delivery" and not ph["delivers"]:
        raise ToolError(f"{ph['name']} does not deliver; choose pickup or another pharmacy")
    lines: dict[str, int] = {}
    for line in items:
        lines[line.medication_id] = lines.get(line.medication_id, 0) + line.quantity
    priced = []
    for med_id, qty in lines.items():
        med = db.one("SELECT * FROM medications WHERE medication_id = ?", med_id)
        if med is None:
            raise ToolError(f"no medication {med_id}")
        if med["requires_rx"]:
            raise ToolError(
                f"{med['name']} {med['strength']} needs a prescription and cannot be ordered over the counter"
            )
        if not 1 <= qty <= 10:
            raise ToolError(f"quantity of {med_id} must be between 1 and 10")
        have = _stock(db, pharmacy_id, med_id)
        if have < qty:
            raise ToolError(f"{ph['name']} has only {have} of {med['name']} {med['strength']}")
        priced.append((med_id, qty, med["unit_price"]))
    total = round(sum(q * p for _, q, p in priced) + (DELIVERY_FEE if fulfillment == "delivery" else 0), 2)
    order_id = db.new_id("ORD")
    db.execute(
        "INSERT INTO orders (order_id, user_id, pharmacy_id, fulfillment, status, total, created_at) VALUES (?, ?, ?, ?, 'placed', ?, ?)",
        order_id,
        db.user_id,
        pharmacy_id,
        fulfillment,
        total,
        db.now(),
    )
    for med_id, qty, price in priced:
        db.execute(
            "INSERT INTO order_items (order_id, medication_id, quantity, unit_price) VALUES (?, ?, ?, ?)",
            order_id,
            med_id,
            qty,
            price,
        )
        db.execute(
            "UPDATE stock SET quantity = quantity - ? WHERE pharmacy_id = ? AND medication_id = ?",
            qty,
            pharmacy_id,
            med_id,
        )
    return {
        "order_id": order_id,
        "status": "placed",
        "pharmacy": ph["name"],
        "fulfillment": fulfillment,
        "total": total,
    }
