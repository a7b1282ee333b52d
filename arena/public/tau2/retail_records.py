"""The records of τ²'s retail database as τ²'s data model shapes them (for `retail.normalize`).

The pydantic models describe the records, in τ²'s field order, with τ²'s defaults: a record read
from `db.json` is validated and dumped through them, so the store holds what τ²'s `model_dump()`
holds. `UserAddress` and `OrderPayment` also build the parts the tools write, so a bad argument's
validation message reads as τ²'s (the model names are part of it).
"""

from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import BaseModel

COLLECTIONS: list[str] = ["products", "users", "orders"]


class Variant(BaseModel):
    """One item (variant) of a product."""

    item_id: str
    options: dict[str, str]
    available: bool
    price: float


class Product(BaseModel):
    """A product type and its items by item id."""

    name: str
    product_id: str
    variants: dict[str, Variant]


class UserName(BaseModel):
    """A user's name."""

    first_name: str
    last_name: str


class UserAddress(BaseModel):
    """An address (named as τ²'s, so a bad argument's validation message reads the same)."""

    address1: str
    address2: str
    city: str
    country: str
    state: str
    zip: str


class CreditCard(BaseModel):
    """A credit card payment method."""

    source: Literal["credit_card"]
    id: str
    brand: str
    last_four: str


class GiftCard(BaseModel):
    """A gift card payment method, with its balance."""

    source: Literal["gift_card"]
    id: str
    balance: float


class Paypal(BaseModel):
    """A PayPal payment method."""

    source: Literal["paypal"]
    id: str


class User(BaseModel):
    """A customer: name, default address, payment methods by id, order ids."""

    user_id: str
    name: UserName
    address: UserAddress
    email: str
    # The union's order decides which model a record validates as; kept as τ²'s.
    payment_methods: dict[str, Union[CreditCard, GiftCard, Paypal]]  # noqa: UP007
    orders: list[str]


class OrderFulfillment(BaseModel):
    """Shipments of an order."""

    tracking_id: list[str]
    item_ids: list[str]


class OrderItem(BaseModel):
    """One item bought in an order, at its purchase price."""

    name: str
    product_id: str
    item_id: str
    price: float
    options: dict[str, str]


class OrderPayment(BaseModel):
    """A payment or refund of an order."""

    transaction_type: Literal["payment", "refund"]
    amount: float
    payment_method_id: str


class Order(BaseModel):
    """An order; the optional fields record a cancellation, an exchange or a return."""

    order_id: str
    user_id: str
    address: UserAddress
    items: list[OrderItem]
    status: Literal[
        "processed",
        "pending",
        "pending (item modified)",
        "delivered",
        "cancelled",
        "exchange requested",
        "return requested",
    ]
    fulfillments: list[OrderFulfillment]
    payment_history: list[OrderPayment]
    cancel_reason: Literal["no longer needed", "ordered by mistake"] | None = None
    exchange_items: list[str] | None = None
    exchange_new_items: list[str] | None = None
    exchange_payment_method_id: str | None = None
    exchange_price_difference: float | None = None
    return_items: list[str] | None = None
    return_payment_method_id: str | None = None


_MODELS: dict[str, type[BaseModel]] = {"products": Product, "users": User, "orders": Order}


def normalize(collection: str, key: str, doc: dict[str, Any]) -> dict[str, Any]:
    """A `db.json` record as τ²'s model dumps it (validated on the way: a bad record fails)."""
    return _MODELS[collection].model_validate(doc).model_dump()
