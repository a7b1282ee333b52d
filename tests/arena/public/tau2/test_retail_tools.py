"""The retail port on a small invented database in τ²'s `db.json` shape: every tool's plain path,
what a cheap agent tries (cancel twice, return what was not delivered, an unavailable item, a wrong
payment method), that a refusal changes nothing, and `normalize` (field order, defaults, floats)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from arena.public.tau2 import retail
from arena.public.tau2.docstore import CallOutcome, DocStore, call_tool, collect_tools
from tests.arena.public.tau2.retail_db import BLUE, DB, GREEN, LARGE, RED, SMALL, WHITE, item

TOOLS = collect_tools(retail)

_TEMPLATE = DocStore.from_data(copy.deepcopy(DB), retail.normalize)


@pytest.fixture
def store() -> DocStore:
    return _TEMPLATE.copy()


def call(store: DocStore, name: str, **arguments: Any) -> CallOutcome:
    return call_tool(TOOLS, store, name, arguments)


def result(store: DocStore, name: str, **arguments: Any) -> Any:
    """A successful call's content, parsed when it is JSON."""
    outcome = call(store, name, **arguments)
    assert not outcome.error, outcome.content
    try:
        return json.loads(outcome.content)
    except json.JSONDecodeError:
        return outcome.content


def refused(store: DocStore, name: str, **arguments: Any) -> str:
    """A refusal's message; the store must be as it was and nothing counted as written."""
    before, written = store.canonical_json(), set(store.written)
    outcome = call(store, name, **arguments)
    assert outcome.error, outcome.content
    assert store.canonical_json() == before and store.written == written
    return outcome.content


# --- normalize and the tool set ------------------------------------------------------------------


def test_normalize_gives_the_models_dump() -> None:
    assert _TEMPLATE.collections == retail.COLLECTIONS == ["products", "users", "orders"]
    order = _TEMPLATE.get("orders", "#W1")
    assert order is not None
    assert list(order) == [
        "order_id", "user_id", "address", "items", "status", "fulfillments", "payment_history",
        "cancel_reason", "exchange_items", "exchange_new_items", "exchange_payment_method_id",
        "exchange_price_difference", "return_items", "return_payment_method_id",
    ]  # fmt: skip
    assert all(order[k] is None for k in list(order)[7:])
    assert list(order["address"]) == ["address1", "address2", "city", "country", "state", "zip"]
    assert order["payment_history"][0]["amount"] == 40.0
    assert isinstance(order["payment_history"][0]["amount"], float)
    ann = _TEMPLATE.get("users", "ann_lee_1")
    assert ann is not None and isinstance(ann["payment_methods"]["gift_card_1"]["balance"], float)
    bo = _TEMPLATE.get("users", "bo_kim_2")
    assert bo is not None and bo["payment_methods"]["paypal_2"] == {"source": "paypal", "id": "paypal_2"}
    mug = _TEMPLATE.get("products", "1000000001")
    assert mug is not None and mug["variants"][RED]["price"] == 10.0
    assert isinstance(mug["variants"][RED]["price"], float)
    # Already normal: unchanged.
    assert retail.normalize("orders", "#W1", order) == order


def test_the_tools_and_which_write() -> None:
    writes = {name for name, tool in TOOLS.items() if tool.writes}
    assert writes == {
        "cancel_pending_order", "exchange_delivered_order_items", "modify_pending_order_address",
        "modify_pending_order_items", "modify_pending_order_payment", "modify_user_address",
        "return_delivered_order_items",
    }  # fmt: skip
    assert set(TOOLS) - writes == {
        "calculate", "find_user_id_by_email", "find_user_id_by_name_zip", "get_order_details",
        "get_product_details", "get_item_details", "get_user_details", "list_all_product_types",
        "transfer_to_human_agents",
    }  # fmt: skip


# --- reads -----------------------------------------------------------------------------------------


def test_reads(store: DocStore) -> None:
    assert result(store, "find_user_id_by_email", email="BO.KIM@example.com") == "bo_kim_2"
    assert refused(store, "find_user_id_by_email", email="nobody@example.com") == "Error: User not found"
    assert (
        result(store, "find_user_id_by_name_zip", first_name="ann", last_name="LEE", zip="10001")
        == "ann_lee_1"
    )
    assert refused(
        store, "find_user_id_by_name_zip", first_name="Ann", last_name="Lee", zip="94105"
    ).endswith("User not found")
    # A record's content is its stored dump, in the model's order.
    assert call(store, "get_order_details", order_id="#W3").content == store.raw("orders", "#W3")
    assert result(store, "get_user_details", user_id="bo_kim_2")["orders"] == ["#W4", "#W5"]
    assert result(store, "get_product_details", product_id="1000000002")["name"] == "Lamp"
    assert result(store, "get_item_details", item_id=BLUE) == {
        "item_id": BLUE,
        "options": {"color": "blue"},
        "available": True,
        "price": 12.5,
    }
    assert result(store, "list_all_product_types") == {"Lamp": "1000000002", "Mug": "1000000001"}
    assert call(store, "list_all_product_types").content == '{"Lamp": "1000000002", "Mug": "1000000001"}'
    assert result(store, "transfer_to_human_agents", summary="wants a refund") == "Transfer successful"
    assert store.written == set()


def test_reads_of_unknown_ids(store: DocStore) -> None:
    assert refused(store, "get_order_details", order_id="W1") == "Error: Order not found"
    assert refused(store, "get_user_details", user_id="ann") == "Error: User not found"
    assert refused(store, "get_product_details", product_id=RED) == "Error: Product not found"
    assert refused(store, "get_item_details", item_id="1000000001") == "Error: Item not found"
    # τ²'s dictionaries hold strings: a number is not an id, whatever its digits.
    assert refused(store, "get_product_details", product_id=1000000001) == "Error: Product not found"
    assert refused(store, "get_order_details", order_id=["#W1"]) == "Error: unhashable type: 'list'"


@pytest.mark.parametrize(
    ("expression", "content"),
    [
        ("2 + 2", "4.0"),
        ("10 / 3", "3.33"),
        (" (1.5 + 2.25) * 4", "15.0"),
        ("-2 ** 2", "-4.0"),
        ("2 ** -1", "0.5"),
        ("7 // 2", "3.0"),
        ("1 / 0", "Error: division by zero"),
        ("import os", "Error: Invalid characters in expression"),
        ("2 *", "Error: invalid syntax (<string>, line 1)"),
        ("(1)(2)", "Error: 'int' object is not callable"),
        ("9 ** 9 ** 9", "Error: int too large to convert to float"),
    ],
)
def test_calculate(store: DocStore, expression: str, content: str) -> None:
    outcome = call(store, "calculate", expression=expression)
    assert outcome.content == content
    assert outcome.error == content.startswith("Error: ")


# --- cancel ------------------------------------------------------------------------------------------


def test_cancel_refunds_a_gift_card_at_once(store: DocStore) -> None:
    order = result(store, "cancel_pending_order", order_id="#W2", reason="ordered by mistake")
    assert order["status"] == "cancelled" and order["cancel_reason"] == "ordered by mistake"
    assert order["payment_history"][-1] == {
        "transaction_type": "refund",
        "amount": 10.0,
        "payment_method_id": "gift_card_1",
    }
    assert (
        result(store, "get_user_details", user_id="ann_lee_1")["payment_methods"]["gift_card_1"]["balance"]
        == 30.0
    )
    assert store.written == {("orders", "#W2"), ("users", "ann_lee_1")}
    # Twice: the second is refused and changes nothing.
    assert (
        refused(store, "cancel_pending_order", order_id="#W2", reason="ordered by mistake")
        == "Error: Non-pending order cannot be cancelled"
    )


def test_cancel_refusals(store: DocStore) -> None:
    assert refused(store, "cancel_pending_order", order_id="#W3", reason="no longer needed").endswith(
        "Non-pending order cannot be cancelled"
    )
    assert refused(store, "cancel_pending_order", order_id="#W5", reason="no longer needed").endswith(
        "Non-pending order cannot be cancelled"
    )
    assert (
        refused(store, "cancel_pending_order", order_id="#W1", reason="too pricey") == "Error: Invalid reason"
    )
    assert (
        refused(store, "cancel_pending_order", order_id="#W9", reason="no longer needed")
        == "Error: Order not found"
    )
    assert store.written == set()


def test_a_refusal_after_a_write_is_rolled_back(store: DocStore) -> None:
    # A pending order paid by a gift card, then by a method the user does not have: the gift card's
    # refund is written before the second payment fails; the savepoint undoes it.
    order = store.get("orders", "#W2")
    assert order is not None
    order["payment_history"].append(
        {"transaction_type": "payment", "amount": 5.0, "payment_method_id": "gone_1"}
    )
    store.put("orders", "#W2", order)
    store.written.clear()
    message = refused(store, "cancel_pending_order", order_id="#W2", reason="no longer needed")
    assert message == "Error: Payment method not found"
    assert store.written == set()


# --- return and exchange of a delivered order ---------------------------------------------------------


def test_return(store: DocStore) -> None:
    order = result(
        store,
        "return_delivered_order_items",
        order_id="#W3",
        item_ids=[SMALL, RED],
        payment_method_id="credit_card_1",
    )
    assert order["status"] == "return requested"
    assert (
        order["return_items"] == sorted([SMALL, RED]) and order["return_payment_method_id"] == "credit_card_1"
    )
    assert store.written == {("orders", "#W3")}
    assert refused(
        store,
        "return_delivered_order_items",
        order_id="#W3",
        item_ids=[RED],
        payment_method_id="credit_card_1",
    ).endswith("Non-delivered order cannot be returned")


def test_return_refusals(store: DocStore) -> None:
    def ret(order_id: str, items: list[str], method: str) -> str:
        return refused(
            store, "return_delivered_order_items", order_id=order_id, item_ids=items, payment_method_id=method
        )

    assert ret("#W1", [RED], "credit_card_1") == "Error: Non-delivered order cannot be returned"
    assert ret("#W5", [BLUE], "paypal_2") == "Error: Non-delivered order cannot be returned"
    assert ret("#W3", [RED], "credit_card_9") == "Error: Payment method should be the original payment method"
    assert ret("#W3", [RED], "paypal_2") == "Error: Payment method not found"  # another user's
    assert ret("#W3", [BLUE], "credit_card_1") == "Error: Some item not found"
    assert ret("#W3", [RED, RED], "credit_card_1") == "Error: Some item not found"
    assert store.written == set()
    # A gift card of the user's is always accepted.
    assert (
        result(
            store,
            "return_delivered_order_items",
            order_id="#W3",
            item_ids=[RED],
            payment_method_id="gift_card_1",
        )["return_payment_method_id"]
        == "gift_card_1"
    )


def test_exchange(store: DocStore) -> None:
    order = result(
        store, "exchange_delivered_order_items", order_id="#W3", item_ids=[SMALL, RED], new_item_ids=[LARGE, BLUE],
        payment_method_id="gift_card_1",
    )  # fmt: skip
    assert order["status"] == "exchange requested"
    assert order["exchange_items"] == sorted([SMALL, RED]) and order["exchange_new_items"] == sorted(
        [LARGE, BLUE]
    )
    assert order["exchange_price_difference"] == 17.5 and order["exchange_payment_method_id"] == "gift_card_1"
    assert order["items"][0]["item_id"] == SMALL  # only requested: the items stay until the exchange
    assert store.written == {("orders", "#W3")}  # nothing charged yet
    assert refused(
        store, "exchange_delivered_order_items", order_id="#W3", item_ids=[RED], new_item_ids=[BLUE], payment_method_id="gift_card_1"
    ).endswith("Non-delivered order cannot be exchanged")  # fmt: skip


def test_exchange_refusals(store: DocStore) -> None:
    def exchange(order_id: str, old: list[str], new: list[str], method: str = "credit_card_1") -> str:
        return refused(
            store, "exchange_delivered_order_items", order_id=order_id, item_ids=old, new_item_ids=new, payment_method_id=method
        )  # fmt: skip

    assert exchange("#W1", [RED], [BLUE]) == "Error: Non-delivered order cannot be exchanged"
    assert exchange("#W3", [RED], [GREEN]) == f"Error: New item {GREEN} not found or available"
    assert exchange("#W3", [RED], [LARGE]) == "Error: Variant not found"  # another product's item
    assert exchange("#W3", [BLUE], [RED]) == f"Error: Number of {BLUE} not found."
    assert exchange("#W3", [RED], [BLUE, BLUE]) == "Error: The number of items to be exchanged should match."
    assert exchange("#W3", [RED], [BLUE], "credit_card_7") == "Error: Payment method not found"
    ann = store.get("users", "ann_lee_1")
    assert ann is not None
    ann["payment_methods"]["gift_card_1"]["balance"] = 1.0
    store.put("users", "ann_lee_1", ann)
    store.written.clear()
    assert (
        exchange("#W3", [RED], [BLUE], "gift_card_1")
        == "Error: Insufficient gift card balance to pay for the price difference"
    )
    assert store.written == set()


# --- changes to a pending order ------------------------------------------------------------------------


def test_modify_items_charges_the_difference(store: DocStore) -> None:
    order = result(
        store, "modify_pending_order_items", order_id="#W1", item_ids=[RED, SMALL], new_item_ids=[BLUE, LARGE],
        payment_method_id="gift_card_1",
    )  # fmt: skip
    assert order["status"] == "pending (item modified)"
    assert [i["item_id"] for i in order["items"]] == [BLUE, LARGE]
    # τ²'s quirk, kept: every modified item takes the last new item's price and options.
    assert [i["price"] for i in order["items"]] == [45.0, 45.0]
    assert [i["options"] for i in order["items"]] == [{"size": "large"}] * 2
    assert order["payment_history"][-1] == {
        "transaction_type": "payment",
        "amount": 17.5,
        "payment_method_id": "gift_card_1",
    }
    assert (
        result(store, "get_user_details", user_id="ann_lee_1")["payment_methods"]["gift_card_1"]["balance"]
        == 2.5
    )
    assert store.written == {("orders", "#W1"), ("users", "ann_lee_1")}
    # Only once: the status is no longer "pending".
    assert refused(
        store, "modify_pending_order_items", order_id="#W1", item_ids=[BLUE], new_item_ids=[RED], payment_method_id="credit_card_1"
    ).endswith("Non-pending order cannot be modified")  # fmt: skip


def test_modify_items_refunds_a_cheaperitem(store: DocStore) -> None:
    order = result(
        store, "modify_pending_order_items", order_id="#W2", item_ids=[RED], new_item_ids=[WHITE],
        payment_method_id="gift_card_1",
    )  # fmt: skip
    assert order["items"][0] == item("1000000001", "Mug", WHITE, 8.0, {"color": "white"})
    assert order["payment_history"][-1] == {
        "transaction_type": "refund",
        "amount": 2.0,
        "payment_method_id": "gift_card_1",
    }
    assert (
        result(store, "get_user_details", user_id="ann_lee_1")["payment_methods"]["gift_card_1"]["balance"]
        == 22.0
    )
    # Paid by card: the order changes, the user does not.
    order = result(
        store, "modify_pending_order_items", order_id="#W1", item_ids=[SMALL], new_item_ids=[LARGE],
        payment_method_id="credit_card_1",
    )  # fmt: skip
    assert (
        order["payment_history"][-1]["transaction_type"] == "payment" and order["items"][1]["price"] == 45.0
    )
    assert store.written == {("orders", "#W1"), ("orders", "#W2"), ("users", "ann_lee_1")}


def test_modify_items_refusals(store: DocStore) -> None:
    def modify(order_id: str, old: list[str], new: list[str], method: str = "credit_card_1") -> str:
        return refused(
            store, "modify_pending_order_items", order_id=order_id, item_ids=old, new_item_ids=new, payment_method_id=method
        )  # fmt: skip

    assert modify("#W3", [RED], [BLUE]) == "Error: Non-pending order cannot be modified"
    assert modify("#W1", [RED], [RED]) == "Error: The new item id should be different from the old item id"
    assert modify("#W1", [RED], [GREEN]) == f"Error: New item {GREEN} not found or available"
    assert modify("#W1", [BLUE], [RED]) == f"Error: {BLUE} not found"
    assert modify("#W1", [RED], []) == "Error: The number of items to be exchanged should match"
    assert modify("#W1", [RED], [BLUE], "paypal_2") == "Error: Payment method not found"
    assert modify("#W1", [SMALL], [LARGE], "gift_card_0") == "Error: Payment method not found"
    ann = store.get("users", "ann_lee_1")
    assert ann is not None
    ann["payment_methods"]["gift_card_1"]["balance"] = 10.0
    store.put("users", "ann_lee_1", ann)
    store.written.clear()
    assert (
        modify("#W1", [SMALL], [LARGE], "gift_card_1")
        == "Error: Insufficient gift card balance to pay for the new item"
    )
    assert store.written == set()


def test_modify_payment(store: DocStore) -> None:
    order = result(store, "modify_pending_order_payment", order_id="#W2", payment_method_id="credit_card_9")
    assert order["payment_history"][1:] == [
        {"transaction_type": "payment", "amount": 10.0, "payment_method_id": "credit_card_9"},
        {"transaction_type": "refund", "amount": 10.0, "payment_method_id": "gift_card_1"},
    ]
    assert (
        result(store, "get_user_details", user_id="ann_lee_1")["payment_methods"]["gift_card_1"]["balance"]
        == 30.0
    )
    # Now two payments in the history: a second change is refused.
    assert refused(
        store, "modify_pending_order_payment", order_id="#W2", payment_method_id="credit_card_1"
    ).endswith("There should be exactly one payment for a pending order")


def test_modify_payment_refusals(store: DocStore) -> None:
    def pay(order_id: str, method: str) -> str:
        return refused(store, "modify_pending_order_payment", order_id=order_id, payment_method_id=method)

    assert pay("#W3", "credit_card_9") == "Error: Non-pending order cannot be modified"
    assert (
        pay("#W1", "credit_card_1")
        == "Error: The new payment method should be different from the current one"
    )
    assert pay("#W1", "gift_card_1") == "Error: Insufficient gift card balance to pay for the order"
    assert pay("#W1", "paypal_2") == "Error: Payment method not found"
    assert store.written == set()


def test_modify_addresses(store: DocStore) -> None:
    new = {
        "address1": "9 Pine Rd",
        "address2": "Apt 4",
        "city": "Austin",
        "state": "TX",
        "country": "USA",
        "zip": "73301",
    }
    in_order = ["address1", "address2", "city", "country", "state", "zip"]
    order = result(store, "modify_pending_order_address", order_id="#W1", **new)
    assert list(order["address"]) == in_order and order["address"]["city"] == "Austin"
    user = result(store, "modify_user_address", user_id="bo_kim_2", **new)
    assert list(user["address"]) == in_order and user["address"]["zip"] == "73301"
    assert store.written == {("orders", "#W1"), ("users", "bo_kim_2")}
    assert refused(store, "modify_pending_order_address", order_id="#W3", **new).endswith(
        "Non-pending order cannot be modified"
    )
    assert refused(store, "modify_user_address", user_id="cy_2", **new) == "Error: User not found"
    # A number where τ²'s model wants text: its validation error, nothing written.
    message = refused(store, "modify_user_address", user_id="ann_lee_1", **(new | {"zip": 73301}))
    assert message.startswith("Error: 1 validation error for UserAddress\nzip\n")
    # "pending (item modified)" still takes a new address (τ² matches "pending" in the status).
    result(
        store,
        "modify_pending_order_items",
        order_id="#W2",
        item_ids=[RED],
        new_item_ids=[BLUE],
        payment_method_id="credit_card_1",
    )
    assert (
        result(store, "modify_pending_order_address", order_id="#W2", **new)["status"]
        == "pending (item modified)"
    )


# --- what the calling convention refuses ------------------------------------------------------------------


def test_unknown_tool_and_wrong_arguments(store: DocStore) -> None:
    assert refused(store, "refund_everything", order_id="#W1") == "Error: Tool 'refund_everything' not found."
    assert refused(store, "cancel_pending_order", order_id="#W1").startswith(
        "Error: RetailTools.cancel_pending_order() missing"
    )
    assert "unexpected keyword argument 'force'" in refused(
        store, "cancel_pending_order", order_id="#W1", reason="no longer needed", force=True
    )
    # A wrong type reads as τ²'s Python error does.
    assert refused(store, "find_user_id_by_email", email=5) == "Error: 'int' object has no attribute 'lower'"
    assert store.written == set()
