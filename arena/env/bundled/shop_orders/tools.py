"""Tools of the Shopwise online store's customer service."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Literal

from arena.env import Db, ToolError, tool

FREE_SHIPPING_FROM = 50.0
SHIPPING_FEE = 5.99
MAX_LINE_QTY = 10


def _sku(db: Db, sku: str) -> dict:
    row = db.one(
        "SELECT s.sku, s.product_id, p.name, s.color, s.size, s.price, s.stock FROM skus s "
        "JOIN products p ON p.product_id = s.product_id WHERE s.sku = ?",
        sku,
    )
    if row is None:
        raise ToolError(f"no product variant {sku}")
    return row


def _own_order(db: Db, order_id: str) -> dict:
    row = db.one("SELECT * FROM orders WHERE order_id = ? AND user_id = ?", order_id, db.user_id)
    if row is None:
        raise ToolError(f"no order {order_id} on your account")
    return row


def _shipping(db: Db, subtotal: float) -> float:
    user = db.one("SELECT tier FROM users WHERE id = ?", db.user_id)
    if (user and user["tier"] == "plus") or subtotal >= FREE_SHIPPING_FROM or subtotal == 0:
        return 0.0
    return SHIPPING_FEE


def _cart(db: Db) -> list[dict]:
    return db.all(
        "SELECT c.sku, p.name, s.color, s.size, c.quantity, s.price AS unit_price, s.stock, "
        "round(c.quantity * s.price, 2) AS line_total FROM cart_items c JOIN skus s ON s.sku = c.sku "
        "JOIN products p ON p.product_id = s.product_id WHERE c.user_id = ? ORDER BY c.added_at",
        db.user_id,
    )


def _returnable_item(db: Db, order_id: str, item_id: str, quantity: int) -> tuple[dict, dict]:
    """The order and item if `quantity` units of it may still be returned or exchanged today."""
    order = _own_order(db, order_id)
    if order["status"] != "delivered":
        raise ToolError(f"order {order_id} is {order['status']}; only delivered orders can be returned")
    item = db.one(
        "SELECT i.*, p.name, p.returnable, p.return_window_days, s.product_id FROM order_items i "
        "JOIN skus s ON s.sku = i.sku JOIN products p ON p.product_id = s.product_id "
        "WHERE i.item_id = ? AND i.order_id = ?",
        item_id,
        order_id,
    )
    if item is None:
        raise ToolError(f"no item {item_id} in order {order_id}")
    if not item["returnable"]:
        raise ToolError(f"{item['name']} is final sale and cannot be returned or exchanged")
    last_day = date.fromisoformat(order["delivered_at"][:10]) + timedelta(days=item["return_window_days"])
    if db.today() > last_day.isoformat():
        raise ToolError(
            f"the {item['return_window_days']}-day return window for {item['name']} ended on {last_day}"
        )
    if quantity < 1:
        raise ToolError("quantity must be at least 1")
    done = db.one(
        "SELECT coalesce(sum(quantity), 0) AS n FROM returns WHERE item_id = ? AND status <> 'rejected'",
        item_id,
    )
    left = item["quantity"] - (done["n"] if done else 0)
    if quantity > left:
        raise ToolError(f"only {left} unit(s) of {item['name']} in this order can still be returned")
    return order, item


@tool
def search_products(
    db: Db, query: str = "", category: str | None = None, max_price: float | None = None
) -> list[dict]:
    """Search the catalogue by words in the name, brand or description; lists each product's variants.

    Args:
        query: Words to look for, e.g. "insulated bottle".
        category: Only this category, e.g. "Kitchen".
        max_price: Only variants costing at most this much.
    """
    sql = "SELECT product_id, name, brand, category, returnable FROM products WHERE 1 = 1"
    params: list = []
    # SQLite's LIKE ignores ASCII case already; lower() on each row only cost time.
    for word in query.lower().split():
        sql += " AND (name LIKE ? OR brand LIKE ? OR description LIKE ?)"
        params += [f"%{word}%"] * 3
    if category:
        sql += " AND lower(category) = lower(?)"
        params.append(category)
    products = db.all(sql + " ORDER BY name", *params)
    if not products:
        return []
    # Every found product's variants in one query, not one per product.
    ids = [p["product_id"] for p in products]
    variants: dict[str, list[dict]] = {i: [] for i in ids}
    for v in db.all(
        "SELECT product_id, sku, color, size, price, stock > 0 AS in_stock FROM skus "
        f"WHERE product_id IN ({', '.join('?' * len(ids))}) AND price <= ? ORDER BY sku",
        *ids,
        max_price if max_price is not None else 1e12,
    ):
        pid = v.pop("product_id")
        variants[pid].append({**v, "in_stock": bool(v["in_stock"])})
    results = []
    for product in products:
        if variants[product["product_id"]]:
            product["returnable"] = bool(product["returnable"])
            product["variants"] = variants[product["product_id"]]
            results.append(product)
    return results


@tool
def get_product(db: Db, product_id: str) -> dict:
    """One product with its description, return policy and every variant's price and stock.

    Args:
        product_id: The product, e.g. "P-1007".
    """
    product = db.one("SELECT * FROM products WHERE product_id = ?", product_id)
    if product is None:
        raise ToolError(f"no product {product_id}")
    product["returnable"] = bool(product["returnable"])
    product["variants"] = db.all(
        "SELECT sku, color, size, price, stock FROM skus WHERE product_id = ? ORDER BY sku", product_id
    )
    return product


@tool
def view_cart(db: Db) -> dict:
    """The customer's cart: lines, subtotal, shipping fee and total."""
    lines = _cart(db)
    subtotal = round(sum(line["line_total"] for line in lines), 2)
    shipping = _shipping(db, subtotal)
    return {
        "items": lines,
        "subtotal": subtotal,
        "shipping_fee": shipping,
        "total": round(subtotal + shipping, 2),
    }


@tool(writes=True)
def add_to_cart(db: Db, sku: str, quantity: int = 1) -> dict:
    """Add units of a product variant to the cart (added to any units already there).

    Args:
        sku: The variant, e.g. "SKU-100701".
        quantity: Units to add.
    """
    variant = _sku(db, sku)
    if quantity < 1:
        raise ToolError("quantity must be at least 1")
    current = db.one("SELECT quantity FROM cart_items WHERE user_id = ? AND sku = ?", db.user_id, sku)
    total = quantity + (current["quantity"] if current else 0)
    if total > MAX_LINE_QTY:
        raise ToolError(f"at most {MAX_LINE_QTY} units per cart line")
    if total > variant["stock"]:
        raise ToolError(
            f"only {variant['stock']} of {variant['name']} ({variant['color']}, {variant['size']}) in stock"
        )
    if current:
        db.execute("UPDATE cart_items SET quantity = ? WHERE user_id = ? AND sku = ?", total, db.user_id, sku)
    else:
        db.execute("INSERT INTO cart_items VALUES (?, ?, ?, ?)", db.user_id, sku, total, db.now())
    return {"sku": sku, "name": variant["name"], "quantity": total}


@tool(writes=True)
def update_cart_item(db: Db, sku: str, quantity: int) -> dict:
    """Set the quantity of a cart line; 0 removes it.

    Args:
        sku: The variant in the cart, e.g. "SKU-101901".
        quantity: The new quantity (0 to remove the line).
    """
    current = db.one("SELECT quantity FROM cart_items WHERE user_id = ? AND sku = ?", db.user_id, sku)
    if current is None:
        raise ToolError(f"{sku} is not in your cart")
    if quantity == 0:
        db.execute("DELETE FROM cart_items WHERE user_id = ? AND sku = ?", db.user_id, sku)
        return {"sku": sku, "quantity": 0, "removed": True}
    variant = _sku(db, sku)
    if not 1 <= quantity <= MAX_LINE_QTY:
        raise ToolError(f"quantity must be between 0 and {MAX_LINE_QTY}")
    if quantity > variant["stock"]:
        raise ToolError(f"only {variant['stock']} in stock")
    db.execute("UPDATE cart_items SET quantity = ? WHERE user_id = ? AND sku = ?", quantity, db.user_id, sku)
    return {"sku": sku, "quantity": quantity, "removed": False}


@tool
def list_addresses(db: Db) -> list[dict]:
    """The customer's saved shipping addresses."""
    rows = db.all(
        "SELECT address_id, label, recipient, line1, city, state, zip, is_default FROM addresses "
        "WHERE user_id = ? ORDER BY is_default DESC, address_id",
        db.user_id,
    )
    return [{**r, "is_default": bool(r["is_default"])} for r in rows]


@tool(writes=True)
def place_order(
    db: Db, address_id: str | None = None, payment_method: Literal["card", "paypal", "gift_card"] = "card"
) -> dict:
    """Order everything in the cart and ship it to a saved address (the default one if not given).

    Args:
        address_id: A saved address of the customer, e.g. "ADR-12".
        payment_method: How to pay.
    """
    lines = _cart(db)
    if not lines:
        raise ToolError("your cart is empty")
    if address_id is None:
        row = db.one("SELECT address_id FROM addresses WHERE user_id = ? AND is_default = 1", db.user_id)
        if row is None:
            raise ToolError("no default address; pass address_id")
        address_id = row["address_id"]
    elif (
        db.one("SELECT 1 FROM addresses WHERE address_id = ? AND user_id = ?", address_id, db.user_id) is None
    ):
        raise ToolError(f"no saved address {address_id} on your account")
    short = [
        f"{line['name']} ({line['color']}, {line['size']})"
        for line in lines
        if line["quantity"] > line["stock"]
    ]
    if short:
        raise ToolError(f"not enough stock for: {', '.join(short)}")
    subtotal = round(sum(line["line_total"] for line in lines), 2)
    shipping = _shipping(db, subtotal)
    order_id = db.new_id("ORD")
    db.execute(
        "INSERT INTO orders (order_id, user_id, address_id, status, placed_at, subtotal, shipping_fee, total, "
        "payment_method, updated_at) VALUES (?, ?, ?, 'placed', ?, ?, ?, ?, ?, ?)",
        order_id,
        db.user_id,
        address_id,
        db.now(),
        subtotal,
        shipping,
        round(subtotal + shipping, 2),
        payment_method,
        db.now(),
    )
    for i, line in enumerate(lines, 1):
        db.execute(
            "INSERT INTO order_items VALUES (?, ?, ?, ?, ?)",
            f"OI-{order_id[4:]}-{i}",
            order_id,
            line["sku"],
            line["quantity"],
            line["unit_price"],
        )
        db.execute("UPDATE skus SET stock = stock - ? WHERE sku = ?", line["quantity"], line["sku"])
    db.execute("DELETE FROM cart_items WHERE user_id = ?", db.user_id)
    return {
        "order_id": order_id,
        "status": "placed",
        "address_id": address_id,
        "items": len(lines),
        "subtotal": subtotal,
        "shipping_fee": shipping,
        "total": round(subtotal + shipping, 2),
    }


@tool
def list_orders(
    db: Db, status: Literal["placed", "processing", "shipped", "delivered", "cancelled"] | None = None
) -> list[dict]:
    """The customer's orders, newest first, with their item names.

    Args:
        status: Only orders with this status.
    """
    sql = "SELECT order_id, status, placed_at, delivered_at, total FROM orders WHERE user_id = ?"
    params: list = [db.user_id]
    if status:
        sql += " AND status = ?"
        params.append(status)
    orders = db.all(sql + " ORDER BY placed_at DESC", *params)
    for order in orders:
        order["items"] = db.all(
            "SELECT i.item_id, i.sku, p.name, s.color, s.size, i.quantity FROM order_items i "
            "JOIN skus s ON s.sku = i.sku JOIN products p ON p.product_id = s.product_id "
            "WHERE i.order_id = ? ORDER BY i.item_id",
            order["order_id"],
        )
    return orders


@tool
def get_order(db: Db, order_id: str) -> dict:
    """One of the customer's orders: items, address, shipment tracking events and returns.

    Args:
        order_id: The order, e.g. "ORD-70412".
    """
    order = _own_order(db, order_id)
    order["items"] = db.all(
        "SELECT i.item_id, i.sku, p.name, s.color, s.size, i.quantity, i.unit_price FROM order_items i "
        "JOIN skus s ON s.sku = i.sku JOIN products p ON p.product_id = s.product_id WHERE i.order_id = ? "
        "ORDER BY i.item_id",
        order_id,
    )
    order["address"] = db.one(
        "SELECT label, recipient, line1, city, state, zip FROM addresses WHERE address_id = ?",
        order["address_id"],
    )
    order["tracking"] = db.all(
        "SELECT at, location, description FROM tracking_events WHERE order_id = ? ORDER BY at", order_id
    )
    order["returns"] = db.all(
        "SELECT return_id, item_id, quantity, kind, exchange_sku, status, refund_amount FROM returns "
        "WHERE order_id = ? ORDER BY created_at",
        order_id,
    )
    return order


@tool(writes=True)
def cancel_order(db: Db, order_id: str, reason: str = "") -> dict:
    """Cancel an order that has not shipped yet; items go back to stock and the total is refunded.

    Args:
        order_id: The order to cancel, e.g. "ORD-70461".
        reason: Why the customer cancels it.
    """
    order = _own_order(db, order_id)
    if order["status"] not in ("placed", "processing"):
        raise ToolError(f"order {order_id} is {order['status']} and can no longer be cancelled")
    for item in db.all("SELECT sku, quantity FROM order_items WHERE order_id = ?", order_id):
        db.execute("UPDATE skus SET stock = stock + ? WHERE sku = ?", item["quantity"], item["sku"])
    db.execute(
        "UPDATE orders SET status = 'cancelled', updated_at = ? WHERE order_id = ?", db.now(), order_id
    )
    return {"order_id": order_id, "status": "cancelled", "refund_amount": order["total"], "reason": reason}


@tool(writes=True)
def request_return(db: Db, order_id: str, item_id: str, reason: str, quantity: int = 1) -> dict:
    """Return units of a delivered item for a refund of their price (shipping is not refunded).

    Args:
        order_id: The delivered order, e.g. "ORD-70420".
        item_id: The order line, e.g. "OI-70420-1".
        reason: Why the item is returned.
        quantity: Units to return.
    """
    if not reason.strip():
        raise ToolError("a return needs a reason")
    _, item = _returnable_item(db, order_id, item_id, quantity)
    refund = round(item["unit_price"] * quantity, 2)
    return_id = db.new_id("RMA")
    db.execute(
        "INSERT INTO returns VALUES (?, ?, ?, ?, 'refund', NULL, ?, 'requested', ?, ?)",
        return_id,
        order_id,
        item_id,
        quantity,
        reason.strip(),
        refund,
        db.now(),
    )
    return {"return_id": return_id, "status": "requested", "item": item["name"], "refund_amount": refund}


@tool(writes=True)
def request_exchange(db: Db, order_id: str, item_id: str, new_sku: str, reason: str) -> dict:
    """Exchange one unit of a delivered item for another in-stock variant of the same product, at no cost.

    Args:
        order_id: The delivered order, e.g. "ORD-70412".
        item_id: The order line to exchange, e.g. "OI-70412-1".
        new_sku: The variant wanted instead (same product), e.g. "SKU-100102".
        reason: Why the item is exchanged, e.g. "too small".
    """
    if not reason.strip():
        raise ToolError("an exchange needs a reason")
    _, item = _returnable_item(db, order_id, item_id, 1)
    new = _sku(db, new_sku)
    if new["product_id"] != item["product_id"]:
        raise ToolError(f"{new_sku} is a different product; an exchange must keep {item['name']}")
    if new_sku == item["sku"]:
        raise ToolError("the new variant is the same as the one bought")
    if new["stock"] < 1:
        raise ToolError(f"{new['name']} ({new['color']}, {new['size']}) is out of stock")
    return_id = db.new_id("RMA")
    db.execute(
        "INSERT INTO returns VALUES (?, ?, ?, 1, 'exchange', ?, ?, 'approved', 0, ?)",
        return_id,
        order_id,
        item_id,
        new_sku,
        reason.strip(),
        db.now(),
    )
    db.execute("UPDATE skus SET stock = stock - 1 WHERE sku = ?", new_sku)
    return {
        "return_id": return_id,
        "status": "approved",
        "item": item["name"],
        "new_variant": {"sku": new_sku, "color": new["color"], "size": new["size"]},
    }
