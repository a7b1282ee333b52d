"""τ²-bench's airline domain tools, ported onto a `DocStore`.

Each function is the port of the τ² tool of the same name: same parameters, same result text and
the same refusals (`Error: <message>`), and the same change to the database, so an episode run
here ends in the state τ²'s environment would reach. τ²'s quirks are kept, since its checker
compares end states: the clock is fixed at 2024-05-15 15:00 (`created_at` of a booking); new
reservations take the first free id of HATHAT, HATHAU, HATHAV and new certificates the first free
of certificate_3221322..3221324; gift-card and certificate balances are floats, prices and payments
whole dollars; cancelling refunds every payment and frees no seat (whatever the flights' dates);
changing flights frees and takes no seat and allows any cabin; the one-stop search finds the second
leg of an overnight first leg on `2024-05-<day+1>` (no zero padding, as τ²); scalar arguments are
used as given (a string count is stored as a string where τ² stores it so). Like τ²'s, the tools
do not enforce the policy (a basic-economy reservation's flights can be changed, a flown one
cancelled): following it is the agent's part, seeing it the checker's.

The records' shapes, lookups and error reporting are in `airline_records.py`, `calculate` in
`arithmetic.py`.

On purpose different:
- A call that fails changes nothing. τ² fails a few calls after a partial write (a booking that pays
  twice with one certificate, a bag change whose fee is not whole dollars) and keeps that part.
- `calculate` refuses an integer power past 2**1_000_000 at once (see `arithmetic.py`).
- `normalize` fills a user's missing `user_id` from its key, so tau-bench (v1)'s airline data, whose
  users lack the field τ²'s model requires, loads as τ²'s own file does.
- The airport list is the same twenty airports as τ²'s, kept here as data.
"""

from __future__ import annotations

import functools
import json
from copy import deepcopy
from typing import Any

from arena.public.tau2.airline_records import COLLECTIONS as COLLECTIONS
from arena.public.tau2.airline_records import (
    Certificate,
    FlightInfo,
    Passenger,
    Payment,
    Reservation,
    as_models,
    find_flight,
    find_reservation,
    find_user,
    on_date,
)
from arena.public.tau2.airline_records import normalize as normalize
from arena.public.tau2.arithmetic import calculate as calculate_text
from arena.public.tau2.docstore import DocStore, Record, Tau2ToolError, ported_tool

TOOLKIT = "AirlineTools"  # τ²'s class of these tools, named in messages about a call's arguments

NOW = "2024-05-15T15:00:00"
NEW_RESERVATION_IDS = ("HATHAT", "HATHAU", "HATHAV")
NEW_CERTIFICATE_IDS = ("certificate_3221322", "certificate_3221323", "certificate_3221324")
AIRPORTS = (
    "SFO San Francisco|JFK New York|LAX Los Angeles|ORD Chicago|DFW Dallas|DEN Denver|SEA Seattle|"
    "ATL Atlanta|MIA Miami|BOS Boston|PHX Phoenix|IAH Houston|LAS Las Vegas|MCO Orlando|EWR Newark|"
    "CLT Charlotte|MSP Minneapolis|DTW Detroit|PHL Philadelphia|LGA LaGuardia"
)


def _dump(item: Any) -> Any:
    return item.model_dump() if isinstance(item, Passenger | Payment) else deepcopy(item)


def _charge(user: dict[str, Any], payment_id: Any, total: Any) -> dict[str, Any] | None:
    """Take a change's price from a saved method (a refund when negative); the payment to record."""
    if isinstance(payment_id, list | dict):
        raise TypeError(f"unhashable type: '{type(payment_id).__name__}'")
    if payment_id not in user["payment_methods"]:
        raise Tau2ToolError("Payment method not found")
    method = user["payment_methods"][payment_id]
    if method["source"] == "certificate":
        raise Tau2ToolError("Certificate cannot be used to update reservation")
    if method["source"] == "gift_card":
        if method["amount"] < total:
            raise Tau2ToolError("Gift card balance is not enough")
        method["amount"] -= total
    return None if total == 0 else Payment(payment_id=payment_id, amount=total).model_dump()


# --- the tools ---------------------------------------------------------------------------------


@ported_tool(writes=True)
def book_reservation(
    store: DocStore,
    user_id: str,
    origin: str,
    destination: str,
    flight_type: str,
    cabin: str,
    flights: list[Any],
    passengers: list[Any],
    payment_methods: list[Any],
    total_baggages: int,
    nonfree_baggages: int,
    insurance: str,
) -> Record:
    """Book a reservation for a user: take seats and charge the payment methods."""
    flights = as_models(flights, FlightInfo)
    passengers = as_models(passengers, Passenger)
    payment_methods = as_models(payment_methods, Payment)
    user = find_user(store, user_id)
    reservation_id = next((r for r in NEW_RESERVATION_IDS if not store.has("reservations", r)), None)
    if reservation_id is None:
        raise Tau2ToolError("Too many reservations")
    reservation = Reservation(
        reservation_id=reservation_id,
        user_id=user_id,
        origin=origin,
        destination=destination,
        flight_type=flight_type,
        cabin=cabin,
        flights=[],
        passengers=deepcopy(passengers),
        payment_history=deepcopy(payment_methods),
        created_at=NOW,
        total_baggages=total_baggages,
        nonfree_baggages=nonfree_baggages,
        insurance=insurance,
    ).model_dump()

    total: Any = 0
    loaded: dict[str, dict[str, Any]] = {}  # one document per flight: a leg named twice counts twice
    taken: list[dict[str, Any]] = []
    for leg in flights:
        number = leg.flight_number
        flight = loaded[number] if number in loaded else find_flight(store, number)
        loaded[number] = flight
        day = on_date(flight, number, leg.date)
        if day["status"] != "available":
            raise Tau2ToolError(f"Flight {number} not available on date {leg.date}")
        if day["available_seats"][cabin] < len(passengers):
            raise Tau2ToolError(f"Not enough seats on flight {number}")
        price = day["prices"][cabin]
        reservation["flights"].append(
            {
                "flight_number": number,
                "origin": flight["origin"],
                "destination": flight["destination"],
                "date": leg.date,
                "price": price,
            }
        )
        taken.append(day)
        total += price * len(passengers)
    if insurance == "yes":
        total += 30 * len(passengers)
    total += 50 * nonfree_baggages

    methods = user["payment_methods"]
    for payment in payment_methods:
        if payment.payment_id not in methods:
            raise Tau2ToolError(f"Payment method {payment.payment_id} not found")
        method = methods[payment.payment_id]
        if method["source"] in ("gift_card", "certificate") and method["amount"] < payment.amount:
            raise Tau2ToolError(f"Not enough balance in payment method {payment.payment_id}")
    paid = sum(payment.amount for payment in payment_methods)
    if paid != total:
        raise Tau2ToolError(f"Payment amount does not add up, total price is {total}, but paid {paid}")
    for payment in payment_methods:
        method = methods[payment.payment_id]  # a certificate named twice: KeyError, as τ²
        if method["source"] == "gift_card":
            method["amount"] -= payment.amount
        elif method["source"] == "certificate":
            del methods[payment.payment_id]

    for day in taken:
        day["available_seats"][cabin] -= len(passengers)
    for number, flight in loaded.items():
        store.put("flights", number, flight)
    user["reservations"].append(reservation_id)
    store.put("reservations", reservation_id, reservation)
    store.put("users", user_id, user)
    return Record(reservation)


@ported_tool(writes=False)
def calculate(store: DocStore, expression: str) -> str:
    """Evaluate an arithmetic expression; the result rounded to two decimals."""
    return calculate_text(expression)


@ported_tool(writes=True)
def cancel_reservation(store: DocStore, reservation_id: str) -> Record:
    """Cancel a reservation: refund every payment to its method."""
    reservation = find_reservation(store, reservation_id)
    history = reservation["payment_history"]
    history.extend(
        Payment(payment_id=p["payment_id"], amount=-p["amount"]).model_dump() for p in list(history)
    )
    reservation["status"] = "cancelled"
    store.put("reservations", reservation_id, reservation)
    return Record(reservation)


@ported_tool(writes=False)
def get_reservation_details(store: DocStore, reservation_id: str) -> Record:
    """A reservation as stored."""
    return Record(find_reservation(store, reservation_id))


@ported_tool(writes=False)
def get_user_details(store: DocStore, user_id: str) -> Record:
    """A user's profile, with payment methods and reservation ids."""
    return Record(find_user(store, user_id))


@ported_tool(writes=False)
def list_all_airports(store: DocStore) -> list[Record]:
    """The airports served, by IATA code and city."""
    pairs = (entry.split(" ", 1) for entry in AIRPORTS.split("|"))
    return [Record(iata=iata, city=city) for iata, city in pairs]


def _direct(
    flights: list[dict[str, Any]],
    date: Any,
    origin: Any,
    destination: Any,
    leave_after: Any = None,
) -> list[dict[str, Any]]:
    found = []
    for flight in flights:
        # In τ²'s order: an odd date only trips on a flight whose airports match.
        if not (
            (origin is None or flight["origin"] == origin)
            and (destination is None or flight["destination"] == destination)
            and date in flight["dates"]
            and flight["dates"][date]["status"] == "available"
            and (leave_after is None or flight["scheduled_departure_time_est"] >= leave_after)
        ):
            continue
        day = flight["dates"][date]
        found.append(
            {
                "flight_number": flight["flight_number"],
                "origin": flight["origin"],
                "destination": flight["destination"],
                "status": "available",
                "scheduled_departure_time_est": flight["scheduled_departure_time_est"],
                "scheduled_arrival_time_est": flight["scheduled_arrival_time_est"],
                "date": None,
                "available_seats": day["available_seats"],
                "prices": day["prices"],
            }
        )
    return found


def _all_flights(store: DocStore) -> list[dict[str, Any]]:
    """Every flight, read-only: a search parses the whole table, so parsed texts are kept."""
    return [_parsed(store.raw("flights", key) or "{}") for key in store.keys("flights")]


@functools.lru_cache(maxsize=1024)  # ~300 flights, a few with seats taken: tens of MB at most
def _parsed(text: str) -> dict[str, Any]:
    return json.loads(text)


@ported_tool(writes=False)
def search_direct_flight(store: DocStore, origin: str, destination: str, date: str) -> list[Record]:
    """Bookable non-stop flights between two airports on a date."""
    return [Record(f) for f in _direct(_all_flights(store), date, origin, destination)]


@ported_tool(writes=False)
def search_onestop_flight(store: DocStore, origin: str, destination: str, date: str) -> list[list[Record]]:
    """Bookable pairs of flights with one connection between two airports on a date."""
    flights = _all_flights(store)
    pairs = []
    for first in _direct(flights, date, origin, None):
        first["date"] = date
        overnight = "+1" in first["scheduled_arrival_time_est"]
        second_date = f"2024-05-{int(date[-2:]) + 1}" if overnight else date
        arrival = first["scheduled_arrival_time_est"]
        for second in _direct(flights, second_date, first["destination"], destination, arrival):
            second["date"] = second_date
            pairs.append([Record(first), Record(second)])
    return pairs


@ported_tool(writes=True)
def send_certificate(store: DocStore, user_id: str, amount: int) -> str:
    """Give a user a travel certificate (at most three per episode)."""
    user = find_user(store, user_id)
    methods = user["payment_methods"]
    for certificate_id in NEW_CERTIFICATE_IDS:
        if certificate_id not in methods:
            certificate = Certificate(id=certificate_id, amount=amount, source="certificate")
            methods[certificate_id] = certificate.model_dump()
            store.put("users", user_id, user)
            return f"Certificate {certificate_id} added to user {user_id} with amount {amount}."
    raise Tau2ToolError("Too many certificates")


@ported_tool(writes=False)
def transfer_to_human_agents(store: DocStore, summary: str) -> str:
    """Hand the conversation to a person (ends the episode)."""
    return "Transfer successful"


@ported_tool(writes=True)
def update_reservation_baggages(
    store: DocStore,
    reservation_id: str,
    total_baggages: int,
    nonfree_baggages: int,
    payment_id: str,
) -> Record:
    """Set a reservation's bags, charging $50 for each extra paid bag."""
    reservation = find_reservation(store, reservation_id)
    user = find_user(store, reservation["user_id"])
    fee = 50 * max(0, nonfree_baggages - reservation["nonfree_baggages"])
    payment = _charge(user, payment_id, fee)
    if payment is not None:
        reservation["payment_history"].append(payment)
    reservation["total_baggages"] = total_baggages
    reservation["nonfree_baggages"] = nonfree_baggages
    store.put("users", reservation["user_id"], user)
    store.put("reservations", reservation_id, reservation)
    return Record(reservation)


@ported_tool(writes=True)
def update_reservation_flights(
    store: DocStore, reservation_id: str, cabin: str, flights: list[Any], payment_id: str
) -> Record:
    """Replace a reservation's legs (all of them, kept ones included) and cabin; settle the fare."""
    flights = as_models(flights, FlightInfo)
    reservation = find_reservation(store, reservation_id)
    user = find_user(store, reservation["user_id"])
    travellers = len(reservation["passengers"])
    total: Any = 0
    legs = []
    for leg in flights:
        kept = next(
            (
                old
                for old in reservation["flights"]
                if old["flight_number"] == leg.flight_number
                and old["date"] == leg.date
                and cabin == reservation["cabin"]
            ),
            None,
        )
        if kept:
            total += kept["price"] * travellers
            legs.append(kept)
            continue
        flight = find_flight(store, leg.flight_number)
        day = on_date(flight, leg.flight_number, leg.date)
        if day["status"] != "available":
            raise Tau2ToolError(f"Flight {leg.flight_number} not available on date {leg.date}")
        if day["available_seats"][cabin] < travellers:
            raise Tau2ToolError(f"Not enough seats on flight {leg.flight_number}")
        price = day["prices"][cabin]
        legs.append(
            {
                "flight_number": leg.flight_number,
                "origin": flight["origin"],
                "destination": flight["destination"],
                "date": leg.date,
                "price": price,
            }
        )
        total += price * travellers
    total -= sum(old["price"] for old in reservation["flights"]) * travellers
    payment = _charge(user, payment_id, total)
    if payment is not None:
        reservation["payment_history"].append(payment)
    reservation["flights"] = legs
    reservation["cabin"] = cabin
    store.put("users", reservation["user_id"], user)
    store.put("reservations", reservation_id, reservation)
    return Record(reservation)


@ported_tool(writes=True)
def update_reservation_passengers(store: DocStore, reservation_id: str, passengers: list[Any]) -> Record:
    """Replace a reservation's passengers (the same number of them)."""
    passengers = as_models(passengers, Passenger)
    reservation = find_reservation(store, reservation_id)
    if len(passengers) != len(reservation["passengers"]):
        raise Tau2ToolError("Number of passengers does not match")
    reservation["passengers"] = (
        [_dump(p) for p in passengers] if isinstance(passengers, list) else deepcopy(passengers)
    )
    store.put("reservations", reservation_id, reservation)
    return Record(reservation)


@ported_tool(writes=False)
def get_flight_status(store: DocStore, flight_number: str, date: str) -> str:
    """A flight's status on a date (available, landed, cancelled, delayed, flying, on time)."""
    return on_date(find_flight(store, flight_number), flight_number, date)["status"]
