"""Tools of the Aurora Air reservation desk."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from arena.env import Db, ToolError, tool

BAG_FEE = 40.0
MAX_BAGS = 3
STANDARD_CANCEL_FEE = 100.0
MAX_PASSENGERS = 6


def _flight(db: Db, flight_id: str) -> dict:
    row = db.one("SELECT * FROM flights WHERE flight_id = ?", flight_id)
    if row is None:
        raise ToolError(f"no flight {flight_id}")
    return row


def _bookable(db: Db, flight: dict) -> None:
    if flight["status"] in ("cancelled", "departed", "landed") or flight["depart_at"] <= db.now():
        raise ToolError(
            f"flight {flight['flight_number']} on {flight['depart_at'][:10]} is {flight['status']}"
        )


def _own_reservation(db: Db, reservation_id: str) -> dict:
    row = db.one(
        "SELECT r.*, f.cabin, f.fare_family, f.price, f.change_fee, f.refundable, f.bags_included "
        "FROM reservations r JOIN fares f ON f.fare_id = r.fare_id WHERE r.reservation_id = ? AND r.user_id = ?",
        reservation_id,
        db.user_id,
    )
    if row is None:
        raise ToolError(f"no reservation {reservation_id} on your account")
    return row


def _confirmed(db: Db, reservation_id: str, *, disrupted_ok: bool = False) -> tuple[dict, dict]:
    """A confirmed reservation of the user and its flight; the flight must not have departed.

    With `disrupted_ok`, a flight the airline cancelled is accepted too (for rebooking or refunds).
    """
    res = _own_reservation(db, reservation_id)
    if res["status"] != "confirmed":
        raise ToolError(f"reservation {reservation_id} is {res['status']}")
    flight = _flight(db, res["flight_id"])
    if not (disrupted_ok and flight["status"] == "cancelled"):
        _bookable(db, flight)
    return res, flight


def _charge(db: Db, reservation_id: str, kind: str, amount: float) -> None:
    db.execute(
        "INSERT INTO charges VALUES (?, ?, ?, ?, ?)",
        db.new_id("CH"),
        reservation_id,
        kind,
        round(amount, 2),
        db.now(),
    )


def _passengers(db: Db, reservation_id: str) -> list[dict]:
    return db.all(
        "SELECT passenger_id, first_name, last_name, seat_no, checked_bags FROM passengers "
        "WHERE reservation_id = ? ORDER BY passenger_id",
        reservation_id,
    )


@tool
def list_airports(db: Db, query: str = "") -> list[dict]:
    """Airports whose code, name or city matches a text (all airports when empty).

    Args:
        query: Part of a city, airport name or IATA code, e.g. "new york".
    """
    like = f"%{query.strip().lower()}%"
    return db.all(
        "SELECT code, name, city, country FROM airports WHERE lower(code) LIKE ? OR lower(name) LIKE ? "
        "OR lower(city) LIKE ? ORDER BY code",
        like,
        like,
        like,
    )


@tool
def search_flights(
    db: Db, origin: str, destination: str, date: str, cabin: Literal["economy", "business"] | None = None
) -> list[dict]:
    """Flights between two airports on a date, with every fare that still has seats.

    Args:
        origin: Departure airport code, e.g. "SFO".
        destination: Arrival airport code, e.g. "SEA".
        date: Departure date, YYYY-MM-DD.
        cabin: Only fares in this cabin.
    """
    try:
        day = datetime.fromisoformat(date).date()
    except ValueError:
        raise ToolError(f"date must look like 2025-06-10, got {date!r}") from None
    for code in (origin, destination):
        if db.one("SELECT 1 FROM airports WHERE code = ?", code.upper()) is None:
            raise ToolError(f"unknown airport code {code!r}; use list_airports to find codes")
    flights = db.all(
        "SELECT flight_id, flight_number, origin, destination, depart_at, arrive_at, aircraft, status FROM flights "
        "WHERE origin = ? AND destination = ? AND substr(depart_at, 1, 10) = ? ORDER BY depart_at",
        origin.upper(),
        destination.upper(),
        day.isoformat(),
    )
    for flight in flights:
        sql = (
            "SELECT fare_id, cabin, fare_family, price, seats_left, bags_included FROM fares "
            "WHERE flight_id = ? AND seats_left > 0"
        )
        params: list = [flight["flight_id"]]
        if cabin:
            sql += " AND cabin = ?"
            params.append(cabin)
        flight["fares"] = db.all(sql + " ORDER BY price", *params)
    return flights


@tool
def get_flight_status(db: Db, flight_number: str, date: str) -> dict:
    """Status and times of a flight by its number on a date.

    Args:
        flight_number: The flight number, e.g. "AR 214".
        date: Departure date, YYYY-MM-DD.
    """
    number = " ".join(flight_number.upper().replace("AR", "AR ").split())
    row = db.one(
        "SELECT flight_id, flight_number, origin, destination, depart_at, arrive_at, aircraft, status FROM flights "
        "WHERE flight_number = ? AND substr(depart_at, 1, 10) = ?",
        number,
        date,
    )
    if row is None:
        raise ToolError(f"no flight {flight_number} on {date}")
    return row


@tool
def list_my_reservations(
    db: Db, status: Literal["confirmed", "cancelled", "flown"] | None = None
) -> list[dict]:
    """The customer's reservations with flight, fare and passengers, earliest departure first.

    Args:
        status: Only reservations with this status.
    """
    sql = (
        "SELECT r.reservation_id, r.status, fl.flight_id, fl.flight_number, fl.origin, fl.destination, fl.depart_at, "
        "f.cabin, f.fare_family, r.total_paid FROM reservations r JOIN flights fl ON fl.flight_id = r.flight_id "
        "JOIN fares f ON f.fare_id = r.fare_id WHERE r.user_id = ?"
    )
    params: list = [db.user_id]
    if status:
        sql += " AND r.status = ?"
        params.append(status)
    rows = db.all(sql + " ORDER BY fl.depart_at", *params)
    for row in rows:
        row["passengers"] = [
            {"passenger_id": p["passenger_id"], "name": f"{p['first_name']} {p['last_name']}"}
            for p in _passengers(db, row["reservation_id"])
        ]
    return rows


@tool
def get_reservation(db: Db, reservation_id: str) -> dict:
    """Full details of one of the customer's reservations: flight, fare rules, passengers, seats, bags, charges.

    Args:
        reservation_id: The reservation code, e.g. "RSV-7KQ2MA".
    """
    res = _own_reservation(db, reservation_id)
    res["flight"] = _flight(db, res["flight_id"])
    res["refundable"] = bool(res["refundable"])
    res["passengers"] = _passengers(db, reservation_id)
    res["charges"] = db.all(
        "SELECT kind, amount, created_at FROM charges WHERE reservation_id = ? ORDER BY created_at, charge_id",
        reservation_id,
    )
    return res


@tool(writes=True)
def book_flight(db: Db, fare_id: str, passenger_names: list[str]) -> dict:
    """Book a fare for one to six passengers; every passenger pays the fare price.

    Args:
        fare_id: The fare to book, from search_flights, e.g. "FR-10022".
        passenger_names: Each passenger's full name as on their ID, e.g. ["Ethan Brooks"].
    """
    fare = db.one("SELECT * FROM fares WHERE fare_id = ?", fare_id)
    if fare is None:
        raise ToolError(f"no fare {fare_id}")
    _bookable(db, _flight(db, fare["flight_id"]))
    names = [" ".join(n.split()) for n in passenger_names]
    if not 1 <= len(names) <= MAX_PASSENGERS:
        raise ToolError(f"a booking has 1 to {MAX_PASSENGERS} passengers")
    if any(len(n.split(" ")) < 2 for n in names):
        raise ToolError("each passenger needs a first and last name")
    if fare["seats_left"] < len(names):
        raise ToolError(f"only {fare['seats_left']} seats left on fare {fare_id}")
    reservation_id = db.new_id("RSV")
    total = round(fare["price"] * len(names), 2)
    db.execute(
        "INSERT INTO reservations VALUES (?, ?, ?, ?, 'confirmed', ?, ?, 0, ?)",
        reservation_id,
        db.user_id,
        fare["flight_id"],
        fare_id,
        db.now(),
        total,
        db.now(),
    )
    for i, name in enumerate(names, 1):
        first, last = name.split(" ", 1)
        db.execute(
            "INSERT INTO passengers VALUES (?, ?, ?, ?, NULL, ?)",
            f"PX-{reservation_id[4:]}-{i}",
            reservation_id,
            first,
            last,
            fare["bags_included"],
        )
    db.execute("UPDATE fares SET seats_left = seats_left - ? WHERE fare_id = ?", len(names), fare_id)
    _charge(db, reservation_id, "fare", total)
    return {
        "reservation_id": reservation_id,
        "status": "confirmed",
        "flight_id": fare["flight_id"],
        "total_paid": total,
    }


@tool(writes=True)
def change_flight(db: Db, reservation_id: str, new_fare_id: str) -> dict:
    """Move a reservation to a fare on another flight of the same route and cabin; charges fee and fare difference.

    Free of charge when Aurora Air cancelled the original flight.

    Args:
        reservation_id: The reservation to change, e.g. "RSV-7KQ2MA".
        new_fare_id: The fare on the new flight, e.g. "FR-10032".
    """
    res, flight = _confirmed(db, reservation_id, disrupted_ok=True)
    disrupted = flight["status"] == "cancelled"
    if res["fare_family"] == "basic" and not disrupted:
        raise ToolError("basic fares cannot be changed")
    new = db.one("SELECT * FROM fares WHERE fare_id = ?", new_fare_id)
    if new is None:
        raise ToolError(f"no fare {new_fare_id}")
    new_flight = _flight(db, new["flight_id"])
    _bookable(db, new_flight)
    if new["flight_id"] == res["flight_id"]:
        raise ToolError("the new fare is on the same flight")
    if (new_flight["origin"], new_flight["destination"]) != (flight["origin"], flight["destination"]):
        raise ToolError(f"a change must keep the route {flight['origin']}-{flight['destination']}")
    if new["cabin"] != res["cabin"]:
        raise ToolError(f"a change must keep the {res['cabin']} cabin")
    count = len(_passengers(db, reservation_id))
    if new["seats_left"] < count:
        raise ToolError(f"only {new['seats_left']} seats left on fare {new_fare_id}")
    fee = 0.0 if disrupted else round(res["change_fee"] * count, 2)
    difference = 0.0 if disrupted else round(max(new["price"] - res["price"], 0.0) * count, 2)
    db.execute("UPDATE fares SET seats_left = seats_left + ? WHERE fare_id = ?", count, res["fare_id"])
    db.execute("UPDATE fares SET seats_left = seats_left - ? WHERE fare_id = ?", count, new_fare_id)
    db.execute("UPDATE passengers SET seat_no = NULL WHERE reservation_id = ?", reservation_id)
    db.execute(
        "UPDATE reservations SET flight_id = ?, fare_id = ?, total_paid = total_paid + ?, updated_at = ? "
        "WHERE reservation_id = ?",
        new["flight_id"],
        new_fare_id,
        fee + difference,
        db.now(),
        reservation_id,
    )
    if fee:
        _charge(db, reservation_id, "change_fee", fee)
    if difference:
        _charge(db, reservation_id, "fare_difference", difference)
    return {
        "reservation_id": reservation_id,
        "flight_id": new["flight_id"],
        "flight_number": new_flight["flight_number"],
        "depart_at": new_flight["depart_at"],
        "change_fee": fee,
        "fare_difference": difference,
        "charged": round(fee + difference, 2),
    }


@tool(writes=True)
def cancel_reservation(db: Db, reservation_id: str) -> dict:
    """Cancel a reservation for a flight that has not departed; the refund follows the fare rules.

    Args:
        reservation_id: The reservation to cancel, e.g. "RSV-5HC3WE".
    """
    res, flight = _confirmed(db, reservation_id, disrupted_ok=True)
    count = len(_passengers(db, reservation_id))
    booked = datetime.fromisoformat(res["booked_at"])
    recent = datetime.fromisoformat(db.now()) - booked <= timedelta(hours=24)
    if recent or res["refundable"] or flight["status"] == "cancelled":
        refund = res["total_paid"]
    elif res["fare_family"] == "standard":
        refund = max(res["total_paid"] - STANDARD_CANCEL_FEE * count, 0.0)
    else:
        refund = 0.0
    refund = round(refund, 2)
    db.execute(
        "UPDATE reservations SET status = 'cancelled', refund_amount = ?, updated_at = ? WHERE reservation_id = ?",
        refund,
        db.now(),
        reservation_id,
    )
    db.execute("UPDATE passengers SET seat_no = NULL WHERE reservation_id = ?", reservation_id)
    db.execute("UPDATE fares SET seats_left = seats_left + ? WHERE fare_id = ?", count, res["fare_id"])
    if refund:
        _charge(db, reservation_id, "refund", -refund)
    return {"reservation_id": reservation_id, "status": "cancelled", "refund_amount": refund}


@tool
def get_seat_map(db: Db, flight_id: str, cabin: Literal["economy", "business"] | None = None) -> dict:
    """Free seats on a flight, with position, extra legroom and fee.

    Args:
        flight_id: The flight, e.g. "FL-1002".
        cabin: Only seats in this cabin.
    """
    flight = _flight(db, flight_id)
    sql = (
        "SELECT s.seat_no, s.cabin, s.position, s.extra_legroom, s.fee FROM seats s WHERE s.flight_id = ? "
        "AND s.blocked = 0 AND NOT EXISTS (SELECT 1 FROM passengers p JOIN reservations r "
        "ON r.reservation_id = p.reservation_id WHERE r.flight_id = s.flight_id AND r.status = 'confirmed' "
        "AND p.seat_no = s.seat_no)"
    )
    params: list = [flight_id]
    if cabin:
        sql += " AND s.cabin = ?"
        params.append(cabin)
    seats = db.all(sql + " ORDER BY CAST(s.seat_no AS INTEGER), s.seat_no", *params)
    for seat in seats:
        seat["extra_legroom"] = bool(seat["extra_legroom"])
    return {"flight_id": flight_id, "flight_number": flight["flight_number"], "free_seats": seats}


@tool(writes=True)
def select_seat(db: Db, reservation_id: str, passenger_id: str, seat_no: str) -> dict:
    """Assign a free seat to a passenger (standard and flex fares only); extra-legroom seats are charged.

    Args:
        reservation_id: The reservation, e.g. "RSV-7KQ2MA".
        passenger_id: The passenger, e.g. "PX-7KQ2MA-2".
        seat_no: The seat, e.g. "5A".
    """
    res, _ = _confirmed(db, reservation_id)
    if res["fare_family"] == "basic":
        raise ToolError("seat selection is not available on basic fares; seats are assigned at check-in")
    pax = db.one(
        "SELECT * FROM passengers WHERE passenger_id = ? AND reservation_id = ?", passenger_id, reservation_id
    )
    if pax is None:
        raise ToolError(f"no passenger {passenger_id} on reservation {reservation_id}")
    seat_no = seat_no.strip().upper()
    seat = db.one("SELECT * FROM seats WHERE flight_id = ? AND seat_no = ?", res["flight_id"], seat_no)
    if seat is None:
        raise ToolError(f"no seat {seat_no} on this flight")
    if seat["cabin"] != res["cabin"]:
        raise ToolError(f"seat {seat_no} is in {seat['cabin']}, the fare is {res['cabin']}")
    if pax["seat_no"] == seat_no:
        raise ToolError(f"{pax['first_name']} already has seat {seat_no}")
    taken = db.one(
        "SELECT 1 FROM passengers p JOIN reservations r ON r.reservation_id = p.reservation_id "
        "WHERE r.flight_id = ? AND r.status = 'confirmed' AND p.seat_no = ?",
        res["flight_id"],
        seat_no,
    )
    if seat["blocked"] or taken:
        raise ToolError(f"seat {seat_no} is taken")
    db.execute("UPDATE passengers SET seat_no = ? WHERE passenger_id = ?", seat_no, passenger_id)
    if seat["fee"]:
        _charge(db, reservation_id, "seat_fee", seat["fee"])
        db.execute(
            "UPDATE reservations SET total_paid = total_paid + ?, updated_at = ? WHERE reservation_id = ?",
            seat["fee"],
            db.now(),
            reservation_id,
        )
    return {"passenger_id": passenger_id, "seat_no": seat_no, "fee": seat["fee"]}


@tool(writes=True)
def add_checked_bags(db: Db, reservation_id: str, passenger_id: str, bags: int = 1) -> dict:
    """Add checked bags for a passenger (at most 3 in total); bags beyond the fare's allowance cost $40 each.

    Args:
        reservation_id: The reservation, e.g. "RSV-7KQ2MA".
        passenger_id: The passenger, e.g. "PX-7KQ2MA-2".
        bags: How many bags to add.
    """
    res, _ = _confirmed(db, reservation_id)
    pax = db.one(
        "SELECT * FROM passengers WHERE passenger_id = ? AND reservation_id = ?", passenger_id, reservation_id
    )
    if pax is None:
        raise ToolError(f"no passenger {passenger_id} on reservation {reservation_id}")
    if bags < 1:
        raise ToolError("bags must be at least 1")
    total = pax["checked_bags"] + bags
    if total > MAX_BAGS:
        raise ToolError(
            f"at most {MAX_BAGS} checked bags per passenger; {pax['first_name']} has {pax['checked_bags']}"
        )
    paid_before = max(pax["checked_bags"] - res["bags_included"], 0)
    fee = round((max(total - res["bags_included"], 0) - paid_before) * BAG_FEE, 2)
    db.execute("UPDATE passengers SET checked_bags = ? WHERE passenger_id = ?", total, passenger_id)
    if fee:
        _charge(db, reservation_id, "bag_fee", fee)
        db.execute(
            "UPDATE reservations SET total_paid = total_paid + ?, updated_at = ? WHERE reservation_id = ?",
            fee,
            db.now(),
            reservation_id,
        )
    return {"passenger_id": passenger_id, "checked_bags": total, "fee": fee}
