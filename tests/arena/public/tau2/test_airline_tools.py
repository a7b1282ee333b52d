"""The airline port (`arena.public.tau2.airline`) on a small airline invented here (`airline_db.py`).

Each tool's ordinary path, the refusals a cheap agent would meet (they leave the store untouched),
and `normalize`. Parity with τ²'s own environment on τ²'s data is measured outside the suite (the
data and tau2-bench are not in CI).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from arena.public.tau2 import airline
from arena.public.tau2.arithmetic import calculate as calculate_text
from arena.public.tau2.docstore import CallOutcome, DocStore, call_tool, collect_tools
from tests.arena.public.tau2.airline_db import ADA, KIM, airline_db

TOOLS = collect_tools(airline)


@pytest.fixture
def store() -> DocStore:
    return DocStore.from_data(airline_db(), airline.normalize)


def _call(store: DocStore, name: str, **arguments: Any) -> CallOutcome:
    return call_tool(TOOLS, store, name, arguments)


def _ok(store: DocStore, name: str, **arguments: Any) -> Any:
    out = _call(store, name, **arguments)
    assert not out.error, out.content
    return json.loads(out.content) if out.content[:1] in "[{" else out.content


# --- normalize and the tool set ---------------------------------------------------------------


def test_normalize_gives_the_records_as_tau2s_models_dump_them(store: DocStore) -> None:
    assert store.collections == airline.COLLECTIONS
    ada = store.get("users", "ada_park_1")
    assert next(iter(ada)) == "user_id" and ada["user_id"] == "ada_park_1"
    assert ada["address"]["address2"] is None and list(ada["address"])[1] == "address2"
    gift = ada["payment_methods"]["gift_card_2"]
    assert list(gift) == ["source", "id", "amount"] and isinstance(gift["amount"], float)
    assert "nickname" not in store.get("users", "bo_chen_2")
    assert list(store.get("flights", "HAT100"))[:3] == ["flight_number", "origin", "destination"]
    res = store.get("reservations", "RES001")
    assert res["status"] is None and list(res)[-1] == "status"
    assert list(res["flights"][0]) == ["flight_number", "origin", "destination", "date", "price"]
    # normalizing a normalized record changes nothing
    assert airline.normalize("users", "ada_park_1", ada) == ada


def test_the_port_has_each_tau2_airline_tool_with_its_mutates_state() -> None:
    writes = {"book_reservation", "cancel_reservation", "send_certificate"}
    writes |= {"update_reservation_baggages", "update_reservation_flights", "update_reservation_passengers"}
    reads = {"calculate", "get_flight_status", "get_reservation_details", "get_user_details"}
    reads |= {
        "list_all_airports",
        "search_direct_flight",
        "search_onestop_flight",
        "transfer_to_human_agents",
    }
    assert {name: tool.writes for name, tool in TOOLS.items()} == {n: n in writes for n in writes | reads}


# --- reads --------------------------------------------------------------------------------------


def test_reads_render_the_stored_records(store: DocStore) -> None:
    out = _call(store, "get_user_details", user_id="ada_park_1")
    assert '"amount": 100.0' in out.content and json.loads(out.content) == store.get("users", "ada_park_1")
    assert _ok(store, "get_reservation_details", reservation_id="RES003")["cabin"] == "basic_economy"
    assert _ok(store, "get_flight_status", flight_number="HAT100", date="2024-05-17") == "cancelled"
    airports = _ok(store, "list_all_airports")
    assert len(airports) == 20 and airports[0] == {"iata": "SFO", "city": "San Francisco"}
    assert _ok(store, "transfer_to_human_agents", summary="wants a person") == "Transfer successful"
    assert store.written == set()


def test_direct_search_lists_available_flights_with_tau2s_fields(store: DocStore) -> None:
    found = _ok(store, "search_direct_flight", origin="BOS", destination="SEA", date="2024-05-16")
    assert found == [
        {
            "flight_number": "HAT100",
            "origin": "BOS",
            "destination": "SEA",
            "status": "available",
            "scheduled_departure_time_est": "08:00:00",
            "scheduled_arrival_time_est": "11:00:00",
            "date": None,
            "available_seats": {"basic_economy": 5, "economy": 3, "business": 1},
            "prices": {"basic_economy": 60, "economy": 120, "business": 400},
        }
    ]
    assert _ok(store, "search_direct_flight", origin="BOS", destination="SEA", date="2024-05-17") == []


def test_onestop_search_pairs_connections_including_overnight_ones(store: DocStore) -> None:
    pairs = _ok(store, "search_onestop_flight", origin="BOS", destination="LAX", date="2024-05-16")
    legs = [[(f["flight_number"], f["date"]) for f in pair] for pair in pairs]
    assert legs == [
        [("HAT100", "2024-05-16"), ("HAT101", "2024-05-16")],
        [("HAT102", "2024-05-16"), ("HAT103", "2024-05-17")],
    ]
    # τ² names the next day without zero padding (2024-05-9), which no flight has
    assert _ok(store, "search_onestop_flight", origin="BOS", destination="LAX", date="2024-05-08") == []


# --- writes -------------------------------------------------------------------------------------


def _booking(**changes: Any) -> dict[str, Any]:
    arguments = {
        "user_id": "ada_park_1",
        "origin": "BOS",
        "destination": "LAX",
        "flight_type": "one_way",
        "cabin": "economy",
        "flights": [
            {"flight_number": "HAT100", "date": "2024-05-16"},
            {"flight_number": "HAT101", "date": "2024-05-16"},
        ],
        "passengers": [ADA],
        "payment_methods": [{"payment_id": "credit_card_1", "amount": 220}],
        "total_baggages": 0,
        "nonfree_baggages": 0,
        "insurance": "no",
    }
    return {**arguments, **changes}


def test_booking_takes_seats_and_charges_each_method(store: DocStore) -> None:
    # 2 travellers x (120 + 100) + insurance 2 x 30 + one paid bag 50 = 550
    pay = [
        {"payment_id": "gift_card_2", "amount": 60},
        {"payment_id": "certificate_3", "amount": 150},
        {"payment_id": "credit_card_1", "amount": 340},
    ]
    booking = _booking(
        passengers=[ADA, KIM], payment_methods=pay, total_baggages=2, nonfree_baggages=1, insurance="yes"
    )
    res = _ok(store, "book_reservation", **booking)
    assert res["reservation_id"] == "HATHAT" and res["created_at"] == "2024-05-15T15:00:00"
    assert [(f["flight_number"], f["origin"], f["price"]) for f in res["flights"]] == [
        ("HAT100", "BOS", 120),
        ("HAT101", "SEA", 100),
    ]
    assert res["payment_history"] == pay and res["status"] is None
    assert store.get("reservations", "HATHAT") == res
    ada = store.get("users", "ada_park_1")
    assert ada["reservations"][-1] == "HATHAT"
    assert (
        ada["payment_methods"]["gift_card_2"]["amount"] == 40.0
        and "certificate_3" not in ada["payment_methods"]
    )
    assert store.get("flights", "HAT100")["dates"]["2024-05-16"]["available_seats"]["economy"] == 1
    assert store.get("flights", "HAT101")["dates"]["2024-05-16"]["available_seats"]["economy"] == 2
    assert _ok(store, "book_reservation", **_booking())["reservation_id"] == "HATHAU"


def test_a_fourth_booking_in_an_episode_is_refused(store: DocStore) -> None:
    for rid in ("HATHAT", "HATHAU", "HATHAV"):
        assert _ok(store, "book_reservation", **_booking())["reservation_id"] == rid
    assert _call(store, "book_reservation", **_booking()).content == "Error: Too many reservations"


def test_cancelling_refunds_every_payment_and_frees_no_seat(store: DocStore) -> None:
    res = _ok(store, "cancel_reservation", reservation_id="RES001")
    assert res["status"] == "cancelled"
    assert res["payment_history"] == [
        {"payment_id": "credit_card_1", "amount": 440},
        {"payment_id": "credit_card_1", "amount": -440},
    ]
    assert store.written == {("reservations", "RES001")}
    # τ²'s tool leaves the policy (no cancelling a flown trip) to the agent
    assert _ok(store, "cancel_reservation", reservation_id="RES002")["status"] == "cancelled"


def test_bags_cost_50_each_extra_paid_bag(store: DocStore) -> None:
    res = _ok(
        store,
        "update_reservation_baggages",
        reservation_id="RES001",
        total_baggages=3,
        nonfree_baggages=2,
        payment_id="gift_card_2",
    )
    assert (res["total_baggages"], res["nonfree_baggages"]) == (3, 2)
    assert res["payment_history"][-1] == {"payment_id": "gift_card_2", "amount": 100}
    assert store.get("users", "ada_park_1")["payment_methods"]["gift_card_2"]["amount"] == 0.0
    fewer = _ok(
        store,
        "update_reservation_baggages",
        reservation_id="RES001",
        total_baggages=1,
        nonfree_baggages=0,
        payment_id="credit_card_1",
    )
    assert len(fewer["payment_history"]) == 2  # nothing to pay: no payment recorded


def test_changing_flights_keeps_named_legs_and_settles_the_difference(store: DocStore) -> None:
    legs = [
        {"flight_number": "HAT102", "date": "2024-05-16"},
        {"flight_number": "HAT103", "date": "2024-05-17"},
    ]
    res = _ok(
        store,
        "update_reservation_flights",
        reservation_id="RES001",
        cabin="economy",
        flights=legs,
        payment_id="gift_card_2",
    )
    # 2 x (140 + 90) - 2 x (120 + 100) = 20
    assert res["payment_history"][-1] == {"payment_id": "gift_card_2", "amount": 20}
    assert [f["flight_number"] for f in res["flights"]] == ["HAT102", "HAT103"]
    assert store.get("users", "ada_park_1")["payment_methods"]["gift_card_2"]["amount"] == 80.0
    kept = [
        {"flight_number": "HAT102", "date": "2024-05-16"},
        {"flight_number": "HAT103", "date": "2024-05-17"},
    ]
    again = _ok(
        store,
        "update_reservation_flights",
        reservation_id="RES001",
        cabin="economy",
        flights=kept,
        payment_id="credit_card_1",
    )
    assert len(again["payment_history"]) == 2  # same legs, same cabin: nothing to pay
    # a cheaper cabin refunds the difference onto the gift card (τ² allows any change, even basic economy)
    down = _ok(
        store,
        "update_reservation_flights",
        reservation_id="RES001",
        cabin="basic_economy",
        flights=kept,
        payment_id="gift_card_2",
    )
    assert down["cabin"] == "basic_economy" and down["payment_history"][-1]["amount"] == 2 * (70 + 40) - 2 * (
        140 + 90
    )
    assert store.get("users", "ada_park_1")["payment_methods"]["gift_card_2"]["amount"] == 320.0


def test_passengers_are_replaced_one_for_one(store: DocStore) -> None:
    new = [ADA, {"first_name": "Lee", "last_name": "Park", "dob": "2012-02-02", "seat": "12A"}]
    res = _ok(store, "update_reservation_passengers", reservation_id="RES001", passengers=new)
    assert res["passengers"][1] == {"first_name": "Lee", "last_name": "Park", "dob": "2012-02-02"}


def test_certificates_take_the_fixed_ids_three_at_most(store: DocStore) -> None:
    said = _ok(store, "send_certificate", user_id="bo_chen_2", amount=100)
    assert said == "Certificate certificate_3221322 added to user bo_chen_2 with amount 100."
    methods = store.get("users", "bo_chen_2")["payment_methods"]
    assert methods["certificate_3221322"] == {
        "source": "certificate",
        "id": "certificate_3221322",
        "amount": 100.0,
    }
    _ok(store, "send_certificate", user_id="bo_chen_2", amount=5)
    _ok(store, "send_certificate", user_id="bo_chen_2", amount=5)
    assert (
        _call(store, "send_certificate", user_id="bo_chen_2", amount=5).content
        == "Error: Too many certificates"
    )


def test_calculate_answers_as_tau2s_eval_does() -> None:
    assert calculate_text("(1 + 2) * 3.5") == "10.5"
    assert calculate_text("1/3") == "0.33"
    assert calculate_text("2**10") == "1024.0"
    for expression, error in [
        ("2 + x", "Invalid characters in expression"),
        ("1/0", "division by zero"),
        ("1+", "invalid syntax (<string>, line 1)"),
        ("2(3)", "'int' object is not callable"),
        ("9**9**9**9", "int too large to convert to float"),  # refused at once, not computed
    ]:
        with pytest.raises(Exception) as caught:
            calculate_text(expression)
        assert str(caught.value) == error


# --- refusals: τ²'s message, nothing changed ----------------------------------------------------


def _bags(nonfree: int, payment_id: str) -> dict[str, Any]:
    return {
        "reservation_id": "RES001",
        "total_baggages": nonfree,
        "nonfree_baggages": nonfree,
        "payment_id": payment_id,
    }


def _change(cabin: str, number: str, date: str) -> dict[str, Any]:
    flights = [{"flight_number": number, "date": date}]
    return {"reservation_id": "RES001", "cabin": cabin, "flights": flights, "payment_id": "credit_card_1"}


def _paying(payment_id: str, amount: int) -> dict[str, Any]:
    return _booking(payment_methods=[{"payment_id": payment_id, "amount": amount}])


BOOK, BAGS, CHANGE = "book_reservation", "update_reservation_baggages", "update_reservation_flights"
REFUSALS: list[tuple[str, dict[str, Any], str]] = [
    ("get_user_details", {"user_id": "nobody"}, "User nobody not found"),
    ("get_reservation_details", {"reservation_id": "NOPE00"}, "Reservation NOPE00 not found"),
    (
        "get_flight_status",
        {"flight_number": "HAT100", "date": "2024-06-01"},
        "Flight HAT100 not found on date 2024-06-01",
    ),
    ("cancel_reservation", {"reservation_id": "NOPE00"}, "Reservation NOPE00 not found"),
    (BOOK, _booking(user_id="nobody"), "User nobody not found"),
    (BOOK, _booking(flights=[{"flight_number": "HAT999", "date": "2024-05-16"}]), "Flight HAT999 not found"),
    (
        BOOK,
        _booking(flights=[{"flight_number": "HAT100", "date": "2024-05-17"}]),
        "Flight HAT100 not available on date 2024-05-17",
    ),
    (BOOK, _booking(cabin="business", passengers=[ADA, KIM]), "Not enough seats on flight HAT100"),
    (BOOK, _paying("credit_card_7", 220), "Payment method credit_card_7 not found"),
    (BOOK, _paying("gift_card_2", 220), "Not enough balance in payment method gift_card_2"),
    (BOOK, _paying("credit_card_1", 200), "Payment amount does not add up, total price is 220, but paid 200"),
    (BOOK, _booking(nonfree_baggages="1"), "unsupported operand type(s) for +=: 'int' and 'str'"),
    (BOOK, _booking(flights=["HAT100"]), "'str' object has no attribute 'flight_number'"),
    (BAGS, _bags(1, "certificate_3"), "Certificate cannot be used to update reservation"),
    (BAGS, _bags(9, "gift_card_2"), "Gift card balance is not enough"),
    (BAGS, _bags(1, "gift_card_9"), "Payment method not found"),
    (CHANGE, _change("first", "HAT103", "2024-05-17"), "'first'"),
    (CHANGE, _change("economy", "HAT100", "2024-05-14"), "Flight HAT100 not available on date 2024-05-14"),
    (
        "update_reservation_passengers",
        {"reservation_id": "RES001", "passengers": [ADA]},
        "Number of passengers does not match",
    ),
    ("send_certificate", {"user_id": "nobody", "amount": 50}, "User nobody not found"),
]


@pytest.mark.parametrize(
    ("name", "arguments", "message"), REFUSALS, ids=[f"{n}-{m[:30]}" for n, _, m in REFUSALS]
)
def test_refusals_give_tau2s_message_and_change_nothing(
    store: DocStore, name: str, arguments: dict[str, Any], message: str
) -> None:
    before = store.canonical_json()
    out = _call(store, name, **arguments)
    assert out.error and out.content == f"Error: {message}"
    assert store.written == set() and store.canonical_json() == before


def test_a_pydantic_refusal_names_tau2s_model(store: DocStore) -> None:
    out = _call(store, "book_reservation", **_booking(passengers=[{"first_name": "A", "last_name": "B"}]))
    assert out.error and out.content.startswith(
        "Error: 1 validation error for Passenger\ndob\n  Field required"
    )
    assert store.written == set()
