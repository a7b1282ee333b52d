"""τ²-bench's retail domain, ported: its tools over a `DocStore` (`users`, `products`, `orders`).

Each function below is the port of the τ² retail tool of the same name: same parameters, same
result (a record as τ²'s pydantic model dumps it, or the same string), the same refusals with
the same messages, and the same writes. `normalize` turns a `db.json` record into that dump
(model field order, absent optional fields as `None`, numbers in float fields as floats, unknown
keys dropped), so the store's canonical JSON is τ²'s `db.model_dump()`'s. The port is kept equal
to τ²'s own environment by a parity run: every retail task's gold actions, replayed here and through
tau2 itself (`side_replay.py --domain retail`), give the same messages, error flags and end-state
hash (114/114 tasks at tau2 a2c0247), and so do cheap off-policy calls (wrong statuses, ids, ...).

τ² quirks kept on purpose, since they decide results and end states:
- `modify_pending_order_items` gives every modified item the price and options of the *last* new
  item in the call (τ² reuses its loop's last variant); five gold calls change several items, so
  the gold end states hold this. The payment it records is the unrounded price difference.
- "pending" statuses are matched as τ² matches them: `modify_pending_order_address` and
  `modify_pending_order_payment` accept any status containing "pending", the other tools only
  exactly "pending" / "delivered".
- A Python failure in a tool (a wrong argument type, say) reads `Error: <message>`, as in τ²;
  an id that is not a string is not found, as in τ²'s dictionaries (the store would match its text).

Differences on purpose:
- A refused call changes nothing: `call_tool` rolls back its savepoint. τ² keeps what a tool had
  written before it failed; in retail that can happen only when an order names a user or a
  payment method missing from the db (never in τ²'s data).
- `calculate` is `arithmetic.calculate`: τ²'s answers without `eval`, and a power of integers
  above a million bits refused (τ² would spend minutes on `9**9**9` before failing anyway).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from arena.public.tau2 import arithmetic
from arena.public.tau2.docstore import DocStore, Record, Tau2ToolError, ported_tool
from arena.public.tau2.retail_records import COLLECTIONS, OrderPayment, UserAddress, normalize

__all__ = ["COLLECTIONS", "normalize"]  # and the tools, found by `collect_tools`
TOOLKIT = "RetailTools"  # τ²'s class of these tools, named in messages about a call's arguments


# --- lookups ------------------------------------------------------------------------------------


def _find(store: DocStore, collection: str, key: Any, missing: str) -> dict[str, Any]:
    if not isinstance(key, str):
        hash(key)  # an unhashable id fails as τ²'s dictionary lookup fails
        raise Tau2ToolError(missing)
    doc = store.get(collection, key)
    if doc is None:
        raise Tau2ToolError(missing)
    return doc


def _order(store: DocStore, order_id: Any) -> dict[str, Any]:
    return _find(store, "orders", order_id, "Order not found")


def _user(store: DocStore, user_id: Any) -> dict[str, Any]:
    return _find(store, "users", user_id, "User not found")


def _variant(store: DocStore, product_id: Any, item_id: Any) -> dict[str, Any]:
    variants = _find(store, "products", product_id, "Product not found")["variants"]
    if item_id not in variants:
        raise Tau2ToolError("Variant not found")
    return variants[item_id]


def _method(user: dict[str, Any], payment_method_id: Any) -> dict[str, Any]:
    """One of the user's payment methods (a part of `user`: changing it changes the user)."""
    if payment_method_id not in user["payment_methods"]:
        raise Tau2ToolError("Payment method not found")
    return user["payment_methods"][payment_method_id]


def _is_gift_card(method: dict[str, Any]) -> bool:
    return method["source"] == "gift_card"


def _first_item(order: dict[str, Any], item_id: Any) -> dict[str, Any]:
    item = next((i for i in order["items"] if i["item_id"] == item_id), None)
    if item is None:
        raise Tau2ToolError(f"Item {item_id} not found")
    return item


def _check_counts(order: dict[str, Any], item_ids: list[Any], message: Callable[[Any], str]) -> None:
    """Each id asked for (duplicates counted) must be in the order at least as many times."""
    held = [i["item_id"] for i in order["items"]]
    for item_id in item_ids:
        if item_ids.count(item_id) > held.count(item_id):
            raise Tau2ToolError(message(item_id))


def _payment(kind: Literal["payment", "refund"], amount: Any, method_id: Any) -> dict[str, Any]:
    return OrderPayment(transaction_type=kind, amount=amount, payment_method_id=method_id).model_dump()


def _address(**fields: Any) -> dict[str, Any]:
    return UserAddress(**fields).model_dump()


@ported_tool(writes=False)
def calculate(store: DocStore, expression: str) -> str:
    """Evaluate an arithmetic expression; the result rounded to 2 decimals, as text."""
    return arithmetic.calculate(expression)


# --- reads --------------------------------------------------------------------------------------


@ported_tool(writes=False)
def find_user_id_by_email(store: DocStore, email: str) -> str:
    """The id of the first user whose email matches, ignoring case."""
    for user_id, user in store.items("users"):
        if user["email"].lower() == email.lower():
            return user_id
    raise Tau2ToolError("User not found")


@ported_tool(writes=False)
def find_user_id_by_name_zip(store: DocStore, first_name: str, last_name: str, zip: str) -> str:
    """The id of the first user with this name (ignoring case) and exactly this zip code."""
    for user_id, user in store.items("users"):
        name = user["name"]
        if (
            name["first_name"].lower() == first_name.lower()
            and name["last_name"].lower() == last_name.lower()
            and user["address"]["zip"] == zip
        ):
            return user_id
    raise Tau2ToolError("User not found")


@ported_tool(writes=False)
def get_order_details(store: DocStore, order_id: str) -> Record:
    """The order record."""
    return Record(_order(store, order_id))


@ported_tool(writes=False)
def get_product_details(store: DocStore, product_id: str) -> Record:
    """The product record with all its items."""
    return Record(_find(store, "products", product_id, "Product not found"))


@ported_tool(writes=False)
def get_item_details(store: DocStore, item_id: str) -> Record:
    """The item (variant) with this id, from the first product that has it."""
    for _, product in store.items("products"):
        if item_id in product["variants"]:
            return Record(product["variants"][item_id])
    raise Tau2ToolError("Item not found")


@ported_tool(writes=False)
def get_user_details(store: DocStore, user_id: str) -> Record:
    """The user record."""
    return Record(_user(store, user_id))


@ported_tool(writes=False)
def list_all_product_types(store: DocStore) -> str:
    """JSON of product name -> product id, sorted by name (a later product wins a name)."""
    by_name = {product["name"]: product["product_id"] for _, product in store.items("products")}
    return json.dumps(by_name, sort_keys=True)


@ported_tool(writes=False)
def transfer_to_human_agents(store: DocStore, summary: str) -> str:
    """Hand the conversation to a human; nothing changes."""
    return "Transfer successful"


# --- writes (every check comes before the first write; a refusal is rolled back anyway) ---------


@ported_tool(writes=True)
def cancel_pending_order(store: DocStore, order_id: str, reason: str) -> Record:
    """Cancel a pending order: refund every payment (a gift card's at once) and record why."""
    order = _order(store, order_id)
    if order["status"] != "pending":
        raise Tau2ToolError("Non-pending order cannot be cancelled")
    if reason not in {"no longer needed", "ordered by mistake"}:
        raise Tau2ToolError("Invalid reason")
    refunds, user = [], None
    for paid in order["payment_history"]:
        refunds.append(_payment("refund", paid["amount"], paid["payment_method_id"]))
        # τ² looks the user up per payment, so an order without payments needs no user.
        user = user or _user(store, order["user_id"])
        method = _method(user, paid["payment_method_id"])
        if _is_gift_card(method):
            method["balance"] = round(method["balance"] + paid["amount"], 2)
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    order["payment_history"].extend(refunds)
    if user is not None:
        store.put("users", user["user_id"], user)
    store.put("orders", order_id, order)
    return Record(order)


def _price_difference(
    store: DocStore,
    order: dict[str, Any],
    item_ids: list[Any],
    new_item_ids: list[Any],
    *,
    same_id_refused: bool,
) -> tuple[Any, dict[str, Any] | None]:
    """The sum of (new price - old price) over the pairs, and the last new variant looked up."""
    difference: Any = 0
    variant = None
    for item_id, new_item_id in zip(item_ids, new_item_ids, strict=False):
        if same_id_refused and item_id == new_item_id:
            raise Tau2ToolError("The new item id should be different from the old item id")
        item = _first_item(order, item_id)
        variant = _variant(store, item["product_id"], new_item_id)
        if not variant["available"]:
            raise Tau2ToolError(f"New item {new_item_id} not found or available")
        difference += variant["price"] - item["price"]
    return difference, variant


@ported_tool(writes=True)
def exchange_delivered_order_items(
    store: DocStore, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
) -> Record:
    """Request an exchange of delivered items for available items of the same products."""
    order = _order(store, order_id)
    if order["status"] != "delivered":
        raise Tau2ToolError("Non-delivered order cannot be exchanged")
    _check_counts(order, item_ids, lambda item_id: f"Number of {item_id} not found.")
    if len(item_ids) != len(new_item_ids):
        raise Tau2ToolError("The number of items to be exchanged should match.")
    difference, _ = _price_difference(store, order, item_ids, new_item_ids, same_id_refused=False)
    difference = round(difference, 2)
    method = _method(_user(store, order["user_id"]), payment_method_id)
    if _is_gift_card(method) and method["balance"] < difference:
        raise Tau2ToolError("Insufficient gift card balance to pay for the price difference")
    order["status"] = "exchange requested"
    order["exchange_items"] = sorted(item_ids)
    order["exchange_new_items"] = sorted(new_item_ids)
    order["exchange_payment_method_id"] = payment_method_id
    order["exchange_price_difference"] = difference
    store.put("orders", order_id, order)
    return Record(order)


@ported_tool(writes=True)
def modify_pending_order_address(
    store: DocStore,
    order_id: str,
    address1: str,
    address2: str,
    city: str,
    state: str,
    country: str,
    zip: str,
) -> Record:
    """Change the shipping address of a pending order."""
    order = _order(store, order_id)
    if "pending" not in order["status"]:
        raise Tau2ToolError("Non-pending order cannot be modified")
    order["address"] = _address(
        address1=address1, address2=address2, city=city, state=state, country=country, zip=zip
    )
    store.put("orders", order_id, order)
    return Record(order)


@ported_tool(writes=True)
def modify_pending_order_items(
    store: DocStore, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
) -> Record:
    """Swap items of a pending order for other items of the same products, settling the price."""
    order = _order(store, order_id)
    if order["status"] != "pending":
        raise Tau2ToolError("Non-pending order cannot be modified")
    _check_counts(order, item_ids, lambda item_id: f"{item_id} not found")
    if len(item_ids) != len(new_item_ids):
        raise Tau2ToolError("The number of items to be exchanged should match")
    difference, variant = _price_difference(store, order, item_ids, new_item_ids, same_id_refused=True)
    user = _user(store, order["user_id"])
    method = _method(user, payment_method_id)
    if _is_gift_card(method) and method["balance"] < difference:
        raise Tau2ToolError("Insufficient gift card balance to pay for the new item")
    kind = "payment" if difference > 0 else "refund"
    order["payment_history"].append(_payment(kind, abs(difference), payment_method_id))
    if _is_gift_card(method):
        method["balance"] = round(method["balance"] - difference, 2)
        store.put("users", user["user_id"], user)
    for item_id, new_item_id in zip(item_ids, new_item_ids, strict=False):
        item = _first_item(order, item_id)  # the first still holding the old id, as τ² finds it
        item["item_id"] = new_item_id
        assert variant is not None  # the loop above ran, so a variant was looked up
        item["price"] = variant["price"]  # τ²'s: the last variant's, for every item
        item["options"] = dict(variant["options"])
    order["status"] = "pending (item modified)"
    store.put("orders", order_id, order)
    return Record(order)


@ported_tool(writes=True)
def modify_pending_order_payment(store: DocStore, order_id: str, payment_method_id: str) -> Record:
    """Pay a pending order with another method: charge the new one, refund the old one."""
    order = _order(store, order_id)
    if "pending" not in order["status"]:
        raise Tau2ToolError("Non-pending order cannot be modified")
    user = _user(store, order["user_id"])
    method = _method(user, payment_method_id)
    history = order["payment_history"]
    if len(history) != 1 or history[0]["transaction_type"] != "payment":
        raise Tau2ToolError("There should be exactly one payment for a pending order")
    old_id = history[0]["payment_method_id"]
    if old_id == payment_method_id:
        raise Tau2ToolError("The new payment method should be different from the current one")
    amount = history[0]["amount"]
    if _is_gift_card(method) and method["balance"] < amount:
        raise Tau2ToolError("Insufficient gift card balance to pay for the order")
    history.extend([_payment("payment", amount, payment_method_id), _payment("refund", amount, old_id)])
    if _is_gift_card(method):
        method["balance"] = round(method["balance"] - amount, 2)
    old_method = _method(user, old_id)
    if _is_gift_card(old_method):
        old_method["balance"] = round(old_method["balance"] + amount, 2)
    store.put("users", user["user_id"], user)
    store.put("orders", order_id, order)
    return Record(order)


@ported_tool(writes=True)
def modify_user_address(
    store: DocStore, user_id: str, address1: str, address2: str, city: str, state: str, country: str, zip: str
) -> Record:
    """Change a user's default address."""
    user = _user(store, user_id)
    user["address"] = _address(
        address1=address1, address2=address2, city=city, state=state, country=country, zip=zip
    )
    store.put("users", user_id, user)
    return Record(user)


@ported_tool(writes=True)
def return_delivered_order_items(
    store: DocStore, order_id: str, item_ids: list[str], payment_method_id: str
) -> Record:
    """Request a return of delivered items, refunded to the original method or a gift card."""
    order = _order(store, order_id)
    if order["status"] != "delivered":
        raise Tau2ToolError("Non-delivered order cannot be returned")
    method = _method(_user(store, order["user_id"]), payment_method_id)
    if not _is_gift_card(method) and payment_method_id != order["payment_history"][0]["payment_method_id"]:
        raise Tau2ToolError("Payment method should be the original payment method")
    _check_counts(order, item_ids, lambda _item_id: "Some item not found")
    order["status"] = "return requested"
    order["return_items"] = sorted(item_ids)
    order["return_payment_method_id"] = payment_method_id
    store.put("orders", order_id, order)
    return Record(order)
