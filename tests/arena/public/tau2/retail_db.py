"""A small retail database in τ²'s `db.json` shape, invented for the tests: two users, two products
(a mug in four colours, one sold out; a lamp in two sizes) and five orders (pending, delivered,
processed). Some records are not normal on purpose (keys out of order, ints in float fields, a key
the model does not know) so that `normalize` has work to do."""

from __future__ import annotations

from typing import Any


def _address(street: str, zip_code: str) -> dict[str, Any]:
    # Keys out of the model's order on purpose: normalize puts them in it.
    return {
        "zip": zip_code,
        "address1": street,
        "address2": "",
        "city": "Springfield",
        "state": "IL",
        "country": "USA",
    }


def item(product: str, name: str, item_id: str, price: float, options: dict[str, str]) -> dict[str, Any]:
    """An order line in τ²'s shape."""
    return {"name": name, "product_id": product, "item_id": item_id, "price": price, "options": options}


RED, BLUE, GREEN, WHITE = "2000000001", "2000000002", "2000000003", "2000000004"  # mugs; green is sold out
SMALL, LARGE = "2000000011", "2000000012"  # lamps

DB: dict[str, Any] = {
    "products": {
        "1000000001": {
            "name": "Mug",
            "product_id": "1000000001",
            "variants": {
                RED: {"item_id": RED, "options": {"color": "red"}, "available": True, "price": 10},
                BLUE: {"item_id": BLUE, "options": {"color": "blue"}, "available": True, "price": 12.5},
                GREEN: {"item_id": GREEN, "options": {"color": "green"}, "available": False, "price": 11.0},
                WHITE: {"item_id": WHITE, "options": {"color": "white"}, "available": True, "price": 8.0},
            },
        },
        "1000000002": {
            "name": "Lamp",
            "product_id": "1000000002",
            "variants": {
                SMALL: {"item_id": SMALL, "options": {"size": "small"}, "available": True, "price": 30.0},
                LARGE: {"item_id": LARGE, "options": {"size": "large"}, "available": True, "price": 45.0},
            },
        },
    },
    "users": {
        "ann_lee_1": {
            "user_id": "ann_lee_1",
            "name": {"first_name": "Ann", "last_name": "Lee"},
            "address": _address("1 Oak St", "10001"),
            "email": "ann.lee@example.com",
            "payment_methods": {
                "credit_card_1": {
                    "source": "credit_card",
                    "id": "credit_card_1",
                    "brand": "visa",
                    "last_four": "1111",
                },
                "credit_card_9": {
                    "source": "credit_card",
                    "id": "credit_card_9",
                    "brand": "amex",
                    "last_four": "9999",
                },
                "gift_card_1": {"source": "gift_card", "id": "gift_card_1", "balance": 20},
            },
            "orders": ["#W1", "#W2", "#W3"],
        },
        "bo_kim_2": {
            "user_id": "bo_kim_2",
            "name": {"first_name": "Bo", "last_name": "Kim"},
            "address": _address("2 Elm St", "94105"),
            "email": "Bo.Kim@Example.com",
            "payment_methods": {"paypal_2": {"source": "paypal", "id": "paypal_2", "nickname": "dropped"}},
            "orders": ["#W4", "#W5"],
        },
    },
    "orders": {
        "#W1": {
            "order_id": "#W1",
            "user_id": "ann_lee_1",
            "address": _address("1 Oak St", "10001"),
            "items": [
                item("1000000001", "Mug", RED, 10.0, {"color": "red"}),
                item("1000000002", "Lamp", SMALL, 30.0, {"size": "small"}),
            ],
            "status": "pending",
            "fulfillments": [],
            "payment_history": [
                {"transaction_type": "payment", "amount": 40, "payment_method_id": "credit_card_1"}
            ],
        },
        "#W2": {
            "order_id": "#W2",
            "user_id": "ann_lee_1",
            "address": _address("1 Oak St", "10001"),
            "items": [item("1000000001", "Mug", RED, 10.0, {"color": "red"})],
            "status": "pending",
            "fulfillments": [],
            "payment_history": [
                {"transaction_type": "payment", "amount": 10.0, "payment_method_id": "gift_card_1"}
            ],
        },
        "#W3": {
            "order_id": "#W3",
            "user_id": "ann_lee_1",
            "address": _address("1 Oak St", "10001"),
            "items": [
                item("1000000002", "Lamp", SMALL, 30.0, {"size": "small"}),
                item("1000000001", "Mug", RED, 10.0, {"color": "red"}),
            ],
            "status": "delivered",
            "fulfillments": [{"tracking_id": ["555"], "item_ids": [SMALL, RED]}],
            "payment_history": [
                {"transaction_type": "payment", "amount": 40.0, "payment_method_id": "credit_card_1"}
            ],
        },
        "#W4": {
            "order_id": "#W4",
            "user_id": "bo_kim_2",
            "address": _address("2 Elm St", "94105"),
            "items": [item("1000000002", "Lamp", LARGE, 45.0, {"size": "large"})],
            "status": "delivered",
            "fulfillments": [{"tracking_id": ["777"], "item_ids": [LARGE]}],
            "payment_history": [
                {"transaction_type": "payment", "amount": 45.0, "payment_method_id": "paypal_2"}
            ],
        },
        "#W5": {
            "order_id": "#W5",
            "user_id": "bo_kim_2",
            "address": _address("2 Elm St", "94105"),
            "items": [item("1000000001", "Mug", BLUE, 12.5, {"color": "blue"})],
            "status": "processed",
            "fulfillments": [],
            "payment_history": [
                {"transaction_type": "payment", "amount": 12.5, "payment_method_id": "paypal_2"}
            ],
        },
    },
}
