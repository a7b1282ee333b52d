"""τ²'s airline records for the port (`airline.py`): their shapes, lookups, and refusals.

The shapes are pydantic models with τ²'s fields and types. Two uses, both needing τ²'s exact
behaviour rather than a look-alike:
- `normalize` dumps each database record through these models, so a stored document carries the
  fields, order, defaults and number types that τ²'s own database dump has (an int amount on a gift
  card becomes a float, an absent `address2` becomes null, unknown fields are dropped);
- the tools validate nested arguments (a flight, a passenger, a payment) with them, and a refusal
  reads as τ²'s does, since pydantic names the model in its message: the classes whose names an
  agent can read (`FlightInfo`, `Passenger`, `Payment`, `Certificate`, `Reservation`) keep τ²'s names.

The lookups refuse as τ²'s do (`User x not found`; a list as a key is unhashable), and
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from arena.public.tau2.docstore import DocStore, Tau2ToolError

Cabin = Literal["business", "economy", "basic_economy"]


class Name(BaseModel):
    """A user's name."""

    first_name: str
    last_name: str


class Address(BaseModel):
    """A user's postal address."""

    address1: str
    address2: str | None = None
    city: str
    country: str
    state: str
    zip: str


class Payment(BaseModel):
    """One payment (negative: a refund) on a reservation; whole dollars."""

    payment_id: str
    amount: int


class CreditCard(BaseModel):
    """A saved credit card (no balance)."""

    source: Literal["credit_card"]
    id: str
    brand: str
    last_four: str


class GiftCard(BaseModel):
    """A saved gift card with its balance."""

    source: Literal["gift_card"]
    id: str
    amount: float


class Certificate(BaseModel):
    """A travel certificate (spent whole when used)."""

    source: Literal["certificate"]
    id: str
    amount: float


class Passenger(BaseModel):
    """A traveller on a reservation, or one saved on a profile."""

    first_name: str
    last_name: str
    dob: str


class Available(BaseModel):
    """A flight date still open for booking."""

    status: Literal["available"]
    available_seats: dict[Cabin, int]
    prices: dict[Cabin, int]


class Landed(BaseModel):
    """A flight date flown."""

    status: Literal["landed"]
    actual_departure_time_est: str
    actual_arrival_time_est: str


class Cancelled(BaseModel):
    """A flight date that will not fly."""

    status: Literal["cancelled"]


class Delayed(BaseModel):
    """A flight date running late."""

    status: Literal["delayed"]
    estimated_departure_time_est: str
    estimated_arrival_time_est: str


class Flying(BaseModel):
    """A flight date in the air."""

    status: Literal["flying"]
    actual_departure_time_est: str
    estimated_arrival_time_est: str


class OnTime(BaseModel):
    """A flight date about to fly on schedule."""

    status: Literal["on time"]
    estimated_departure_time_est: str
    estimated_arrival_time_est: str


class Flight(BaseModel):
    """A scheduled flight and its state on each date."""

    flight_number: str
    origin: str
    destination: str
    scheduled_departure_time_est: str
    scheduled_arrival_time_est: str
    dates: dict[str, Available | Landed | Cancelled | Delayed | Flying | OnTime]


class ReservationFlight(BaseModel):
    """One leg of a reservation, at the price paid per passenger."""

    flight_number: str
    origin: str
    destination: str
    date: str
    price: int


class FlightInfo(BaseModel):
    """A leg as an agent names it: flight number and date."""

    flight_number: str
    date: str


class User(BaseModel):
    """A customer profile."""

    user_id: str
    name: Name
    address: Address
    email: str
    dob: str
    payment_methods: dict[str, CreditCard | GiftCard | Certificate]
    saved_passengers: list[Passenger]
    membership: Literal["gold", "silver", "regular"]
    reservations: list[str]


class Reservation(BaseModel):
    """A booking: its legs, travellers, payments and extras."""

    reservation_id: str
    user_id: str
    origin: str
    destination: str
    flight_type: Literal["round_trip", "one_way"]
    cabin: Cabin
    flights: list[ReservationFlight]
    passengers: list[Passenger]
    payment_history: list[Payment]
    created_at: str
    total_baggages: int
    nonfree_baggages: int
    insurance: Literal["yes", "no"]
    status: Literal["cancelled"] | None = None


COLLECTIONS = ["flights", "users", "reservations"]
RECORD_MODELS: dict[str, type[BaseModel]] = {
    "flights": Flight,
    "users": User,
    "reservations": Reservation,
}


def normalize(collection: str, key: str, doc: dict[str, Any]) -> dict[str, Any]:
    """A record as τ²'s model dumps it (field order, defaults, float balances, no extra fields)."""
    if collection == "users" and "user_id" not in doc:
        doc = {"user_id": key, **doc}
    return RECORD_MODELS[collection].model_validate(doc).model_dump()


# --- lookups that refuse as τ²'s do (`User x not found`; a list as a key: unhashable) ------------


def _find(store: DocStore, collection: str, key: Any) -> dict[str, Any] | None:
    if isinstance(key, list | dict):
        raise TypeError(f"unhashable type: '{type(key).__name__}'")
    return store.get(collection, key) if isinstance(key, str) else None


def find_user(store: DocStore, user_id: Any) -> dict[str, Any]:
    """A user's profile, or τ²'s refusal."""
    user = _find(store, "users", user_id)
    if user is None:
        raise Tau2ToolError(f"User {user_id} not found")
    return user


def find_reservation(store: DocStore, reservation_id: Any) -> dict[str, Any]:
    """A reservation, or τ²'s refusal."""
    reservation = _find(store, "reservations", reservation_id)
    if reservation is None:
        raise Tau2ToolError(f"Reservation {reservation_id} not found")
    return reservation


def find_flight(store: DocStore, flight_number: Any) -> dict[str, Any]:
    """A flight with all its dates, or τ²'s refusal."""
    flight = _find(store, "flights", flight_number)
    if flight is None:
        raise Tau2ToolError(f"Flight {flight_number} not found")
    return flight


def on_date(flight: dict[str, Any], flight_number: Any, date: Any) -> dict[str, Any]:
    """A flight's state on a date (a part of `flight`: changing it changes the flight)."""
    if isinstance(date, list | dict):
        raise TypeError(f"unhashable type: '{type(date).__name__}'")
    if date not in flight["dates"]:
        raise Tau2ToolError(f"Flight {flight_number} not found on date {date}")
    return flight["dates"][date]


def as_models(items: Any, model: type[Any]) -> Any:
    """A list of objects validated as `model`s, as τ² does; anything else is left as given."""
    if all(isinstance(item, dict) for item in items):
        return [model(**item) for item in items]
    return items
