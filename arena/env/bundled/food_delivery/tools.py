"""Tools of the food delivery environment: restaurants, menus, orders, addresses, payments, reviews."""

from __future__ import annotations

from pydantic import BaseModel, Field

from arena.env import Db, ToolError, tool

MAX_TIP = 50.0


class OrderLine(BaseModel):
    """One line of a new order."""

    item_id: str = Field(description='A menu item id, e.g. "M-0301".')
    quantity: int = Field(1, description="How many, 1 to 20.")


def _own_order(db: Db, order_id: str) -> dict:
    order = db.one("SELECT * FROM orders WHERE order_id = ? AND user_id = ?", order_id, db.user_id)
    if order is None:
        raise ToolError(f"no order {order_id} on your account")
    return order


def _own_address(db: Db, address_id: str) -> dict:
    addr = db.one("SELECT * FROM addresses WHERE address_id = ? AND user_id = ?", address_id, db.user_id)
    if addr is None:
        raise ToolError(f"no saved address {address_id} on your account")
    return addr


@tool
def search_restaurants(db: Db, query: str = "", cuisine: str = "", open_only: bool = False) -> dict:
    """Search restaurants by name and/or cuisine.

    Args:
        query: Part of the restaurant name, e.g. "luigi". Empty matches all.
        cuisine: Cuisine filter, e.g. "Thai". Empty matches all.
        open_only: Only restaurants that are open now.
    """
    sql = "SELECT restaurant_id, name, cuisine, rating, is_open, delivery_fee, min_order, prep_minutes FROM restaurants WHERE 1=1"
    params: list = []
    if query.strip():
        sql += " AND name LIKE ?"
        params.append(f"%{query.strip()}%")
    if cuisine.strip():
        sql += " AND cuisine LIKE ?"
        params.append(cuisine.strip())
    if open_only:
        sql += " AND is_open = 1"
    rows = db.all(sql + " ORDER BY rating DESC, name", *params)
    for r in rows:
        r["is_open"] = bool(r["is_open"])
    return {"restaurants": rows, "count": len(rows)}


@tool
def get_menu(db: Db, restaurant_id: str, vegetarian_only: bool = False) -> dict:
    """Get a restaurant's menu with item ids, prices and availability.

    Args:
        restaurant_id: The restaurant, e.g. "R-03".
        vegetarian_only: Only vegetarian items.
    """
    rest = db.one(
        "SELECT restaurant_id, name, is_open, min_order, delivery_fee FROM restaurants WHERE restaurant_id = ?",
        restaurant_id,
    )
    if rest is None:
        raise ToolError(f"no restaurant {restaurant_id}")
    sql = "SELECT item_id, name, category, price, is_vegetarian, available FROM menu_items WHERE restaurant_id = ?"
    if vegetarian_only:
        sql += " AND is_vegetarian = 1"
    items = db.all(sql + " ORDER BY category, name", restaurant_id)
    for it in items:
        it["is_vegetarian"] = bool(it["is_vegetarian"])
        it["available"] = bool(it["available"])
    rest["is_open"] = bool(rest["is_open"])
    return {"restaurant": rest, "items": items}


@tool
def list_orders(db: Db, status: str = "") -> dict:
    """List the customer's orders, newest first.

    Args:
        status: Filter by status: placed, preparing, out_for_delivery, delivered or cancelled. Empty for all.
    """
    sql = (
        "SELECT o.order_id, r.name AS restaurant, o.status, o.total, o.created_at FROM orders o "
        "JOIN restaurants r ON r.restaurant_id = o.restaurant_id WHERE o.user_id = ?"
    )
    params: list = [db.user_id]
    if status:
        sql += " AND o.status = ?"
        params.append(status)
    rows = db.all(sql + " ORDER BY o.created_at DESC", *params)
    return {"orders": rows, "count": len(rows)}


@tool
def get_order(db: Db, order_id: str) -> dict:
    """Get one of the customer's orders with its items, address, payment and courier.

    Args:
        order_id: The order, e.g. "ORD-1002".
    """
    o = _own_order(db, order_id)
    rest = db.one("SELECT name FROM restaurants WHERE restaurant_id = ?", o["restaurant_id"])
    items = db.all(
        "SELECT oi.item_id, m.name, oi.quantity, oi.unit_price FROM order_items oi "
        "JOIN menu_items m ON m.item_id = oi.item_id WHERE oi.order_id = ? ORDER BY oi.item_id",
        order_id,
    )
    addr = db.one(
        "SELECT address_id, label, street, city, zip FROM addresses WHERE address_id = ?", o["address_id"]
    )
    pay = db.one("SELECT payment_id, method_id, amount, status FROM payments WHERE order_id = ?", order_id)
    courier = None
    if o["courier_id"]:
        courier = db.one("SELECT name, vehicle FROM couriers WHERE courier_id = ?", o["courier_id"])
    return {
        "order_id": order_id,
        "restaurant_id": o["restaurant_id"],
        "restaurant": rest["name"] if rest else None,
        "status": o["status"],
        "items": items,
        "subtotal": o["subtotal"],
        "delivery_fee": o["delivery_fee"],
        "tip": o["tip"],
        "total": o["total"],
        "notes": o["notes"],
        "address": addr,
        "payment": pay,
        "courier": courier,
        "created_at": o["created_at"],
    }


@tool
def list_addresses(db: Db) -> dict:
    """List the customer's saved delivery addresses."""
    rows = db.all(
        "SELECT address_id, label, street, city, zip, instructions, is_default FROM addresses WHERE user_id = ? ORDER BY address_id",
        db.user_id,
    )
    for r in rows:
        r["is_default"] = bool(r["is_default"])
    default = next((r["address_id"] for r in rows if r["is_default"]), None)
    return {"addresses": rows, "count": len(rows), "default_address_id": default}


@tool
def list_payment_methods(db: Db) -> dict:
    """List the customer's saved payment methods."""
    rows = db.all(
        "SELECT method_id, kind, brand, last4, is_default FROM payment_methods WHERE user_id = ? ORDER BY method_id",
        db.user_id,
    )
    for r in rows:
        r["is_default"] = bool(r["is_default"])
    default = next((r["method_id"] for r in rows if r["is_default"]), None)
    return {"payment_methods": rows, "count": len(rows), "default_method_id": default}


@tool(writes=True)
def place_order(
    db: Db,
    restaurant_id: str,
    items: list[OrderLine],
    address_id: str = "",
    payment_method_id: str = "",
    tip: float = 0.0,
    notes: str = "",
) -> dict:
    """Place a new order and charge it. Defaults to the customer's default address and payment method.

    Args:
        restaurant_id: The restaurant, e.g. "R-05".
        items: The lines to order, each an item_id from that restaurant's menu and a quantity.
        address_id: A saved address id; empty for the default address.
        payment_method_id: A saved payment method id; empty for the default one.
        tip: Tip for the courier in dollars, 0 to 50.
        notes: Instructions for the restaurant.
    """
    rest = db.one("SELECT * FROM restaurants WHERE restaurant_id = ?", restaurant_id)
    if rest is None:
        raise ToolError(f"no restaurant {restaurant_id}")
    if not rest["is_open"]:
        raise ToolError(f"{rest['name']} is closed right now")
    if not items:
        raise ToolError("an order needs at least one item")
    if not 0 <= tip <= MAX_TIP:
        raise ToolError(f"tip must be between 0 and {MAX_TIP:.0f} dollars")
    lines: dict[str, int] = {}
    for line in items:
        if not 1 <= line.quantity <= 20:
            raise ToolError(f"quantity of {line.item_id} must be between 1 and 20")
        lines[line.item_id] = lines.get(line.item_id, 0) + line.quantity
    priced = []
    subtotal = 0.0
    for item_id, qty in lines.items():
        m = db.one("SELECT * FROM menu_items WHERE item_id = ?", item_id)
        if m is None or m["restaurant_id"] != restaurant_id:
            raise ToolError(f"item {item_id} is not on the menu of {rest['name']}")
        if not m["available"]:
            raise ToolError(f"{m['name']} ({item_id}) is not available right now")
        if qty > 20:
            raise ToolError(f"quantity of {item_id} must be between 1 and 20")
        priced.append((item_id, qty, m["price"]))
        subtotal += m["price"] * qty
    subtotal = round(subtotal, 2)
    if subtotal < rest["min_order"]:
        raise ToolError(
            f"subtotal {subtotal:.2f} is below the minimum order of {rest['min_order']:.2f} at {rest['name']}"
        )
    if address_id:
        _own_address(db, address_id)
    else:
        addr = db.one("SELECT address_id FROM addresses WHERE user_id = ? AND is_default = 1", db.user_id)
        if addr is None:
            raise ToolError("no default address; pass address_id")
        address_id = addr["address_id"]
    if payment_method_id:
        if (
            db.one(
                "SELECT 1 FROM payment_methods WHERE method_id = ? AND user_id = ?",
                payment_method_id,
                db.user_id,
            )
            is None
        ):
            raise ToolError(f"no payment method {payment_method_id} on your account")
    else:
        pm = db.one("SELECT method_id FROM payment_methods WHERE user_id = ? AND is_default = 1", db.user_id)
        if pm is None:
            raise ToolError("no default payment method; pass payment_method_id")
        payment_method_id = pm["method_id"]
    total = round(subtotal + rest["delivery_fee"] + tip, 2)
    order_id = db.new_id("ORD")
    now = db.now()
    db.execute(
        "INSERT INTO orders (order_id, user_id, restaurant_id, address_id, courier_id, status, subtotal, delivery_fee, "
        "tip, total, notes, cancel_reason, created_at, updated_at) VALUES (?, ?, ?, ?, NULL, 'placed', ?, ?, ?, ?, ?, '', ?, ?)",
        order_id,
        db.user_id,
        restaurant_id,
        address_id,
        subtotal,
        rest["delivery_fee"],
        round(tip, 2),
        total,
        notes,
        now,
        now,
    )
    for item_id, qty, price in priced:
        db.execute(
            "INSERT INTO order_items (order_id, item_id, quantity, unit_price) VALUES (?, ?, ?, ?)",
            order_id,
            item_id,
            qty,
            price,
        )
    payment_id = db.new_id("PAY")
    db.execute(
        "INSERT INTO payments (payment_id, order_id, method_id, amount, status, created_at) VALUES (?, ?, ?, ?, 'captured', ?)",
        payment_id,
        order_id,
        payment_method_id,
        total,
        now,
    )
    return {
        "order_id": order_id,
        "status": "placed",
        "restaurant": rest["name"],
        "subtotal": subtotal,
        "delivery_fee": rest["delivery_fee"],
        "tip": round(tip, 2),
        "total": total,
        "address_id": address_id,
        "payment_method_id": payment_method_id,
        "estimated_minutes": rest["prep_minutes"] + 20,
    }


@tool(writes=True)
def cancel_order(db: Db, order_id: str, reason: str = "") -> dict:
    """Cancel one of the customer's orders that is still "placed"; the payment is refunded in full.

    Args:
        order_id: The order to cancel, e.g. "ORD-1002".
        reason: Why the customer cancels it.
    """
    order = _own_order(db, order_id)
    if order["status"] != "placed":
        raise ToolError(f"order {order_id} is {order['status']} and can no longer be cancelled")
    db.execute(
        "UPDATE orders SET status = 'cancelled', cancel_reason = ?, updated_at = ? WHERE order_id = ?",
        reason,
        db.now(),
        order_id,
    )
    db.execute("UPDATE payments SET status = 'refunded' WHERE order_id = ?", order_id)
    return {"order_id": order_id, "status": "cancelled", "refunded": order["total"]}


@tool(writes=True)
def change_delivery_address(db: Db, order_id: str, address_id: str) -> dict:
    """Send a "placed" order to another of the customer's saved addresses.

    Args:
        order_id: The order, e.g. "ORD-1007".
        address_id: The saved address to deliver to, e.g. "ADR-102".
    """
    order = _own_order(db, order_id)
    addr = _own_address(db, address_id)
    if order["status"] != "placed":
        raise ToolError(f"order {order_id} is {order['status']}; its address can no longer be changed")
    if order["address_id"] == address_id:
        raise ToolError(f"order {order_id} already goes to {address_id}")
    db.execute(
        "UPDATE orders SET address_id = ?, updated_at = ? WHERE order_id = ?", address_id, db.now(), order_id
    )
    return {"order_id": order_id, "address_id": address_id, "label": addr["label"], "street": addr["street"]}


@tool(writes=True)
def update_tip(db: Db, order_id: str, tip: float) -> dict:
    """Set the courier tip of an order that is not cancelled; the total and the charge change with it.

    Args:
        order_id: The order, e.g. "ORD-1008".
        tip: The new tip in dollars, 0 to 50.
    """
    order = _own_order(db, order_id)
    if order["status"] == "cancelled":
        raise ToolError(f"order {order_id} is cancelled")
    if not 0 <= tip <= MAX_TIP:
        raise ToolError(f"tip must be between 0 and {MAX_TIP:.0f} dollars")
    total = round(order["subtotal"] + order["delivery_fee"] + tip, 2)
    db.execute(
        "UPDATE orders SET tip = ?, total = ?, updated_at = ? WHERE order_id = ?",
        round(tip, 2),
        total,
        db.now(),
        order_id,
    )
    db.execute("UPDATE payments SET amount = ? WHERE order_id = ?", total, order_id)
    return {"order_id": order_id, "tip": round(tip, 2), "total": total}


@tool(writes=True)
def add_address(
    db: Db, label: str, street: str, city: str, zip: str, instructions: str = "", make_default: bool = False
) -> dict:
    """Save a new delivery address for the customer.

    Args:
        label: A short name, e.g. "Gym".
        street: Street and number, with apartment if any.
        city: City.
        zip: 5-digit ZIP code.
        instructions: Delivery instructions for the courier.
        make_default: Make it the default address.
    """
    if not label.strip() or not street.strip() or not city.strip():
        raise ToolError("label, street and city are required")
    if not (len(zip) == 5 and zip.isdigit()):
        raise ToolError(f"invalid ZIP code {zip!r}: use 5 digits")
    if db.one(
        "SELECT 1 FROM addresses WHERE user_id = ? AND lower(label) = lower(?)", db.user_id, label.strip()
    ):
        raise ToolError(f"you already have an address labelled {label!r}")
    address_id = db.new_id("ADR")
    if make_default:
        db.execute("UPDATE addresses SET is_default = 0 WHERE user_id = ?", db.user_id)
    db.execute(
        "INSERT INTO addresses (address_id, user_id, label, street, city, zip, instructions, is_default) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        address_id,
        db.user_id,
        label.strip(),
        street.strip(),
        city.strip(),
        zip,
        instructions,
        int(make_default),
    )
    return {"address_id": address_id, "label": label.strip(), "is_default": make_default}


@tool(writes=True)
def rate_order(db: Db, order_id: str, rating: int, comment: str = "") -> dict:
    """Review a delivered order (once per order).

    Args:
        order_id: The delivered order, e.g. "ORD-1004".
        rating: 1 (worst) to 5 (best).
        comment: Optional text of the review.
    """
    order = _own_order(db, order_id)
    if order["status"] != "delivered":
        raise ToolError(f"order {order_id} is {order['status']}; only delivered orders can be reviewed")
    if not 1 <= rating <= 5:
        raise ToolError("rating must be between 1 and 5")
    if db.one("SELECT 1 FROM reviews WHERE order_id = ?", order_id):
        raise ToolError(f"order {order_id} has already been reviewed")
    review_id = db.new_id("REV")
    db.execute(
        "INSERT INTO reviews (review_id, order_id, user_id, restaurant_id, rating, comment, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        review_id,
        order_id,
        db.user_id,
        order["restaurant_id"],
        rating,
        comment,
        db.now(),
    )
    return {"review_id": review_id, "order_id": order_id, "rating": rating}
