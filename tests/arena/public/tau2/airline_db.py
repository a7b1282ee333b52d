"""A small airline invented for the airline port's tests, in τ²'s `db.json` shape.

Five flights (one overnight, one connection the day after, a landed and a cancelled date), two
users (one in tau-bench v1's shape: no `user_id`, no `address2`, int balances), three reservations
(one flown, one basic economy).
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any


def _day(seats: tuple[int, int, int], prices: tuple[int, int, int]) -> dict[str, Any]:
    cabins = ("basic_economy", "economy", "business")
    return {
        "status": "available",
        "available_seats": dict(zip(cabins, seats, strict=True)),
        "prices": dict(zip(cabins, prices, strict=True)),
    }


def _flight(number: str, route: str, times: str, dates: dict[str, Any]) -> dict[str, Any]:
    origin, destination = route.split("-")
    departure, arrival = times.split("-")
    return {
        # τ²'s file puts the airports first; the model (and so `normalize`) puts the number first
        "origin": origin,
        "destination": destination,
        "flight_number": number,
        "scheduled_departure_time_est": departure,
        "scheduled_arrival_time_est": arrival,
        "dates": dates,
    }


FLIGHTS = {
    "HAT100": _flight(
        "HAT100",
        "BOS-SEA",
        "08:00:00-11:00:00",
        {
            "2024-05-14": {
                "status": "landed",
                "actual_departure_time_est": "2024-05-14T08:05:00",
                "actual_arrival_time_est": "2024-05-14T11:02:00",
            },
            "2024-05-16": _day((5, 3, 1), (60, 120, 400)),
            "2024-05-17": {"status": "cancelled"},
        },
    ),
    "HAT101": _flight(
        "HAT101", "SEA-LAX", "12:00:00-14:00:00", {"2024-05-16": _day((4, 4, 2), (50, 100, 300))}
    ),
    "HAT102": _flight(
        "HAT102",
        "BOS-ORD",
        "22:00:00-01:00:00+1",
        {"2024-05-08": _day((9, 9, 9), (70, 140, 350)), "2024-05-16": _day((9, 9, 9), (70, 140, 350))},
    ),
    "HAT103": _flight(
        "HAT103",
        "ORD-LAX",
        "06:00:00-08:30:00",
        {"2024-05-09": _day((9, 9, 9), (40, 90, 250)), "2024-05-17": _day((9, 9, 9), (40, 90, 250))},
    ),
    "HAT104": _flight(
        "HAT104", "LAX-BOS", "09:00:00-17:00:00", {"2024-05-20": _day((2, 2, 2), (80, 160, 500))}
    ),
}

USERS = {
    "ada_park_1": {  # tau-bench v1's shape: no `user_id`, no `address2`, an int gift-card balance
        "name": {"first_name": "Ada", "last_name": "Park"},
        "address": {
            "address1": "1 Elm St",
            "city": "Boston",
            "country": "USA",
            "state": "MA",
            "zip": "02101",
        },
        "email": "ada@example.com",
        "dob": "1980-03-04",
        "payment_methods": {
            "credit_card_1": {
                "source": "credit_card",
                "brand": "visa",
                "last_four": "1111",
                "id": "credit_card_1",
            },
            "gift_card_2": {"source": "gift_card", "amount": 100, "id": "gift_card_2"},
            "certificate_3": {"source": "certificate", "amount": 150, "id": "certificate_3"},
        },
        "saved_passengers": [{"first_name": "Kim", "last_name": "Park", "dob": "2010-01-01"}],
        "membership": "gold",
        "reservations": ["RES001", "RES002"],
    },
    "bo_chen_2": {
        "user_id": "bo_chen_2",
        "name": {"first_name": "Bo", "last_name": "Chen"},
        "address": {
            "address1": "9 Oak Ave",
            "address2": "Apt 2",
            "city": "Seattle",
            "country": "USA",
            "state": "WA",
            "zip": "98101",
        },
        "email": "bo@example.com",
        "dob": "1975-07-08",
        "payment_methods": {
            "credit_card_9": {
                "source": "credit_card",
                "brand": "amex",
                "last_four": "9999",
                "id": "credit_card_9",
            }
        },
        "saved_passengers": [],
        "membership": "regular",
        "reservations": ["RES003"],
        "nickname": "bo",  # not a field of τ²'s model: dropped
    },
}

ADA, KIM = (
    {"first_name": "Ada", "last_name": "Park", "dob": "1980-03-04"},
    {"first_name": "Kim", "last_name": "Park", "dob": "2010-01-01"},
)


def _reservation(
    rid: str, user: str, cabin: str, legs: list[tuple[str, str, str, str, int]], **rest: Any
) -> dict[str, Any]:
    flights = [
        {"flight_number": n, "origin": o, "destination": d, "date": day, "price": p}
        for n, o, d, day, p in legs
    ]
    return {
        "reservation_id": rid,
        "user_id": user,
        "origin": flights[0]["origin"],
        "destination": flights[-1]["destination"],
        "flight_type": "one_way",
        "cabin": cabin,
        "flights": flights,
        "created_at": "2024-05-01T10:00:00",
        "total_baggages": 1,
        "nonfree_baggages": 0,
        "insurance": "no",
        **rest,
    }


RESERVATIONS = {
    "RES001": _reservation(
        "RES001",
        "ada_park_1",
        "economy",
        [("HAT100", "BOS", "SEA", "2024-05-16", 120), ("HAT101", "SEA", "LAX", "2024-05-16", 100)],
        passengers=[ADA, KIM],
        payment_history=[{"payment_id": "credit_card_1", "amount": 440}],
    ),
    "RES002": _reservation(  # flown
        "RES002",
        "ada_park_1",
        "basic_economy",
        [("HAT100", "BOS", "SEA", "2024-05-14", 55)],
        passengers=[ADA],
        payment_history=[{"payment_id": "gift_card_2", "amount": 55}],
    ),
    "RES003": _reservation(
        "RES003",
        "bo_chen_2",
        "basic_economy",
        [("HAT104", "LAX", "BOS", "2024-05-20", 80)],
        passengers=[{"first_name": "Bo", "last_name": "Chen", "dob": "1975-07-08"}],
        payment_history=[{"payment_id": "credit_card_9", "amount": 80}],
    ),
}


def airline_db() -> dict[str, dict[str, Any]]:
    """A fresh copy of the database."""
    return deepcopy({"flights": FLIGHTS, "users": USERS, "reservations": RESERVATIONS})
