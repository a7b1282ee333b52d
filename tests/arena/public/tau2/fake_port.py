"""A stand-in port of a few retail tools over the mini domain, for tests that must not need the real
port (`arena.public.tau2.retail`): enough behaviour (lookups, refusals, writes) to score runs."""

from __future__ import annotations

from typing import Any

from arena.public.tau2.docstore import DocStore, Record, Tau2ToolError, ported_tool

COLLECTIONS = ["products", "users", "orders"]


def normalize(collection: str, key: str, doc: dict[str, Any]) -> dict[str, Any]:
    """The mini db's records are already as the model dumps them."""
    return dict(doc)


def _order(store: DocStore, order_id: str) -> dict[str, Any]:
    order = store.get("orders", order_id)
    if order is None:
        raise Tau2ToolError("Order not found")
    return order


def _user(store: DocStore, user_id: str) -> dict[str, Any]:
    user = store.get("users", user_id)
    if user is None:
        raise Tau2ToolError("User not found")
    return user


@ported_tool(writes=False)
def find_user_id_by_email(store: DocStore, email: str) -> str:
    for key, user in store.items("users"):
        if user["email"].lower() == email.lower():
            return key
    raise Tau2ToolError("User not found")


@ported_tool(writes=False)
def get_user_details(store: DocStore, user_id: str) -> Record:
    return Record(_user(store, user_id))


@ported_tool(writes=False)
def get_order_details(store: DocStore, order_id: str) -> Record:
    return Record(_order(store, order_id))


@ported_tool(writes=True)
def cancel_pending_order(store: DocStore, order_id: str, reason: str) -> Record:
    order = _order(store, order_id)
    if order["status"] != "pending":
        raise Tau2ToolError("Non-pending order cannot be cancelled")
    if reason not in ("no longer needed", "ordered by mistake"):
        raise Tau2ToolError("Invalid reason")
    refunds = [
        {"transaction_type": "refund", "amount": p["amount"], "payment_method_id": p["payment_method_id"]}
        for p in order["payment_history"]
    ]
    order.update(status="cancelled", cancel_reason=reason)
    order["payment_history"] = order["payment_history"] + refunds
    store.put("orders", order_id, order)
    return Record(order)


def _address(address1: str, address2: str, city: str, state: str, country: str, zip: str) -> dict[str, str]:
    return {
        "address1": address1,
        "address2": address2,
        "city": city,
        "country": country,
        "state": state,
        "zip": zip,
    }


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
    order = _order(store, order_id)
    if "pending" not in order["status"]:
        raise Tau2ToolError("Non-pending order cannot be modified")
    order["address"] = _address(address1, address2, city, state, country, zip)
    store.put("orders", order_id, order)
    return Record(order)


@ported_tool(writes=True)
def modify_user_address(
    store: DocStore,
    user_id: str,
    address1: str,
    address2: str,
    city: str,
    state: str,
    country: str,
    zip: str,
) -> Record:
    user = _user(store, user_id)
    user["address"] = _address(address1, address2, city, state, country, zip)
    store.put("users", user_id, user)
    return Record(user)


@ported_tool(writes=False)
def transfer_to_human_agents(store: DocStore, summary: str) -> str:
    return "Transfer successful"
