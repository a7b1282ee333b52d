"""Tools of the StayWell Hotels booking service."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Literal

from arena.env import Db, ToolError, tool

MAX_NIGHTS = 30
CHECK_IN_HOUR = 15


def _date(value: str, what: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise ToolError(f"{what} must be a date like 2025-06-20, got {value!r}") from None


def _nights(check_in: str, check_out: str, today: str) -> list[str]:
    start = _date(check_in, "check_in")
    end = _date(check_out, "check_out")
    if end <= start:
        raise ToolError("check_out must be after check_in")
    if start.isoformat() < today:
        raise ToolError(f"check-in {check_in} is in the past")
    count = (end - start).days
    if count > MAX_NIGHTS:
        raise ToolError(f"a stay can be at most {MAX_NIGHTS} nights, this one is {count}")
    return [(start + timedelta(days=i)).isoformat() for i in range(count)]


def _quote(db: Db, room_type_id: str, nights: list[str]) -> tuple[float, list[dict]]:
    """Total price and per-night rows; raises if any night is unavailable."""
    rows = db.all(
        f"SELECT night, rooms_left, rate FROM availability WHERE room_type_id = ? "
        f"AND night IN ({','.join('?' * len(nights))}) ORDER BY night",
        room_type_id,
        *nights,
    )
    by_night = {r["night"]: r for r in rows}
    missing = [n for n in nights if n not in by_night or by_night[n]["rooms_left"] < 1]
    if missing:
        raise ToolError(f"room type {room_type_id} is not available on {', '.join(missing)}")
    return round(sum(by_night[n]["rate"] for n in nights), 2), [by_night[n] for n in nights]


def _own_booking(db: Db, booking_id: str) -> dict:
    row = db.one("SELECT * FROM bookings WHERE booking_id = ? AND user_id = ?", booking_id, db.user_id)
    if row is None:
        raise ToolError(f"no booking {booking_id} on your account")
    return row


def _deadline(db: Db, booking: dict) -> str:
    hours = db.one("SELECT free_cancel_hours FROM hotels WHERE hotel_id = ?", booking["hotel_id"])
    start = datetime.fromisoformat(booking["check_in"]).replace(hour=CHECK_IN_HOUR)
    return (start - timedelta(hours=hours["free_cancel_hours"] if hours else 0)).isoformat()


def _refund(db: Db, booking: dict) -> float:
    """What cancelling the booking now would refund."""
    refundable = db.one("SELECT refundable FROM room_types WHERE room_type_id = ?", booking["room_type_id"])
    if not refundable or not refundable["refundable"]:
        return 0.0
    if db.now() <= _deadline(db, booking):
        return round(booking["total_price"], 2)
    first = db.one(
        "SELECT rate FROM availability WHERE room_type_id = ? AND night = ?",
        booking["room_type_id"],
        booking["check_in"],
    )
    nights = (_date(booking["check_out"], "check_out") - _date(booking["check_in"], "check_in")).days
    first_night = first["rate"] if first else booking["total_price"] / nights
    return round(max(booking["total_price"] - first_night, 0.0), 2)


def _set_rooms(db: Db, room_type_id: str, nights: list[str], delta: int) -> None:
    for night in nights:
        db.execute(
            "UPDATE availability SET rooms_left = rooms_left + ? WHERE room_type_id = ? AND night = ?",
            delta,
            room_type_id,
            night,
        )


@tool
def search_hotels(
    db: Db,
    city: str,
    check_in: str,
    check_out: str,
    guests: int = 1,
    min_stars: int | None = None,
    max_total_price: float | None = None,
) -> list[dict]:
    """Find hotels in a city with room types free for every night of a stay, with the stay's total price.

    Args:
        city: City name, e.g. "Lisbon".
        check_in: Arrival date, YYYY-MM-DD.
        check_out: Departure date, YYYY-MM-DD.
        guests: Number of guests the room must hold.
        min_stars: Only hotels with at least this many stars.
        max_total_price: Only room types whose total for the stay is at most this many USD.
    """
    nights = _nights(check_in, check_out, db.today())
    hotels = db.all(
        "SELECT hotel_id, name, stars, address FROM hotels WHERE lower(city) = lower(?) AND stars >= ? "
        "ORDER BY name",
        city.strip(),
        min_stars or 1,
    )
    results = []
    for hotel in hotels:
        rooms = []
        for rt in db.all(
            "SELECT room_type_id, name, beds, capacity, refundable FROM room_types "
            "WHERE hotel_id = ? AND capacity >= ? ORDER BY room_type_id",
            hotel["hotel_id"],
            guests,
        ):
            try:
                total, _ = _quote(db, rt["room_type_id"], nights)
            except ToolError:
                continue
            if max_total_price is not None and total > max_total_price:
                continue
            rooms.append({**rt, "refundable": bool(rt["refundable"]), "total_price": total})
        if rooms:
            results.append({**hotel, "nights": len(nights), "rooms": rooms})
    return results


@tool
def get_hotel(db: Db, hotel_id: str) -> dict:
    """Details of one hotel: address, stars, cancellation window, amenities, room types and review score.

    Args:
        hotel_id: The hotel, e.g. "HTL-101".
    """
    hotel = db.one("SELECT * FROM hotels WHERE hotel_id = ?", hotel_id)
    if hotel is None:
        raise ToolError(f"no hotel {hotel_id}")
    rooms = db.all(
        "SELECT room_type_id, name, beds, capacity, refundable, base_rate FROM room_types "
        "WHERE hotel_id = ? ORDER BY room_type_id",
        hotel_id,
    )
    score = db.one(
        "SELECT round(avg(rating), 1) AS avg, count(*) AS n FROM reviews WHERE hotel_id = ?", hotel_id
    )
    hotel["amenities"] = [a for a in hotel["amenities"].split(",") if a]
    hotel["room_types"] = [{**r, "refundable": bool(r["refundable"])} for r in rooms]
    hotel["review_score"] = score["avg"] if score else None
    hotel["review_count"] = score["n"] if score else 0
    return hotel


@tool
def check_availability(db: Db, room_type_id: str, check_in: str, check_out: str) -> dict:
    """Nightly rates and rooms left for one room type over a stay, and whether it can be booked.

    Args:
        room_type_id: The room type, e.g. "RT-1011".
        check_in: Arrival date, YYYY-MM-DD.
        check_out: Departure date, YYYY-MM-DD.
    """
    rt = db.one(
        "SELECT room_type_id, hotel_id, name, capacity FROM room_types WHERE room_type_id = ?", room_type_id
    )
    if rt is None:
        raise ToolError(f"no room type {room_type_id}")
    nights = _nights(check_in, check_out, db.today())
    rows = {
        r["night"]: r
        for r in db.all(
            "SELECT night, rooms_left, rate FROM availability WHERE room_type_id = ? AND night >= ? AND night < ?",
            room_type_id,
            check_in,
            check_out,
        )
    }
    per_night = [rows.get(n, {"night": n, "rooms_left": 0, "rate": None}) for n in nights]
    available = all(r["rooms_left"] > 0 and r["rate"] is not None for r in per_night)
    total = round(sum(r["rate"] for r in per_night), 2) if available else None
    return {**rt, "available": available, "total_price": total, "nights": per_night}


@tool
def list_my_bookings(
    db: Db, status: Literal["confirmed", "cancelled", "completed", "no_show"] | None = None
) -> list[dict]:
    """The signed-in guest's bookings, soonest check-in first, optionally filtered by status.

    Args:
        status: Only bookings with this status.
    """
    sql = (
        "SELECT b.booking_id, b.hotel_id, h.name AS hotel_name, h.city, b.room_type_id, r.name AS room_type, "
        "b.check_in, b.check_out, b.guests, b.status, b.total_price FROM bookings b "
        "JOIN hotels h ON h.hotel_id = b.hotel_id JOIN room_types r ON r.room_type_id = b.room_type_id "
        "WHERE b.user_id = ?"
    )
    params: list = [db.user_id]
    if status:
        sql += " AND b.status = ?"
        params.append(status)
    return db.all(sql + " ORDER BY b.check_in", *params)


@tool
def get_booking(db: Db, booking_id: str) -> dict:
    """One of the guest's bookings with guests, price, and what cancelling it now would refund.

    Args:
        booking_id: The booking, e.g. "BK-2041".
    """
    booking = _own_booking(db, booking_id)
    names = db.all("SELECT full_name FROM booking_guests WHERE booking_id = ? ORDER BY position", booking_id)
    booking["guest_names"] = [n["full_name"] for n in names]
    hotel = db.one("SELECT name, city FROM hotels WHERE hotel_id = ?", booking["hotel_id"])
    rt = db.one("SELECT name, refundable FROM room_types WHERE room_type_id = ?", booking["room_type_id"])
    booking["hotel_name"] = hotel["name"] if hotel else None
    booking["room_type"] = rt["name"] if rt else None
    booking["refundable_rate"] = bool(rt and rt["refundable"])
    if booking["status"] == "confirmed":
        booking["free_cancellation_until"] = _deadline(db, booking) if booking["refundable_rate"] else None
        booking["refund_if_cancelled_now"] = _refund(db, booking)
    return booking


@tool(writes=True)
def book_room(
    db: Db,
    room_type_id: str,
    check_in: str,
    check_out: str,
    guests: int = 1,
    guest_names: list[str] | None = None,
    special_requests: str = "",
) -> dict:
    """Book a room type for a stay; the price is the sum of the nightly rates.

    Args:
        room_type_id: The room type to book, e.g. "RT-1011".
        check_in: Arrival date, YYYY-MM-DD.
        check_out: Departure date, YYYY-MM-DD.
        guests: Number of guests (at most the room's capacity).
        guest_names: Full names of the guests; defaults to the signed-in guest.
        special_requests: Free-text requests for the hotel.
    """
    rt = db.one("SELECT hotel_id, name, capacity FROM room_types WHERE room_type_id = ?", room_type_id)
    if rt is None:
        raise ToolError(f"no room type {room_type_id}")
    if guests < 1:
        raise ToolError("guests must be at least 1")
    if guests > rt["capacity"]:
        raise ToolError(f"{rt['name']} holds at most {rt['capacity']} guests")
    names = [n.strip() for n in (guest_names or []) if n.strip()]
    if len(names) > guests:
        raise ToolError(f"{len(names)} guest names given for {guests} guests")
    if not names:
        user = db.one("SELECT name FROM users WHERE id = ?", db.user_id)
        names = [user["name"]] if user else []
    nights = _nights(check_in, check_out, db.today())
    total, _ = _quote(db, room_type_id, nights)
    booking_id = db.new_id("BK")
    db.execute(
        "INSERT INTO bookings (booking_id, user_id, hotel_id, room_type_id, check_in, check_out, guests, status, "
        "total_price, special_requests, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'confirmed', ?, ?, ?, ?)",
        booking_id,
        db.user_id,
        rt["hotel_id"],
        room_type_id,
        check_in,
        check_out,
        guests,
        total,
        special_requests.strip(),
        db.now(),
        db.now(),
    )
    for i, name in enumerate(names, 1):
        db.execute("INSERT INTO booking_guests VALUES (?, ?, ?)", booking_id, i, name)
    _set_rooms(db, room_type_id, nights, -1)
    return {
        "booking_id": booking_id,
        "status": "confirmed",
        "hotel_id": rt["hotel_id"],
        "room_type_id": room_type_id,
        "check_in": check_in,
        "check_out": check_out,
        "nights": len(nights),
        "total_price": total,
    }


@tool(writes=True)
def change_booking_dates(db: Db, booking_id: str, new_check_in: str, new_check_out: str) -> dict:
    """Move a confirmed, refundable booking to new dates in the same room type; the price is recalculated.

    Args:
        booking_id: The booking to change, e.g. "BK-2041".
        new_check_in: New arrival date, YYYY-MM-DD.
        new_check_out: New departure date, YYYY-MM-DD.
    """
    booking = _own_booking(db, booking_id)
    if booking["status"] != "confirmed":
        raise ToolError(f"booking {booking_id} is {booking['status']} and cannot be changed")
    if booking["check_in"] <= db.today():
        raise ToolError(f"booking {booking_id} has already started")
    rt = db.one("SELECT refundable FROM room_types WHERE room_type_id = ?", booking["room_type_id"])
    if not rt or not rt["refundable"]:
        raise ToolError(f"booking {booking_id} is a non-refundable rate and its dates cannot be changed")
    if (new_check_in, new_check_out) == (booking["check_in"], booking["check_out"]):
        raise ToolError("the new dates are the same as the current ones")
    old = _nights(booking["check_in"], booking["check_out"], booking["check_in"])
    new = _nights(new_check_in, new_check_out, db.today())
    _set_rooms(db, booking["room_type_id"], old, +1)
    try:
        total, _ = _quote(db, booking["room_type_id"], new)
    except ToolError:
        _set_rooms(db, booking["room_type_id"], old, -1)
        raise
    _set_rooms(db, booking["room_type_id"], new, -1)
    db.execute(
        "UPDATE bookings SET check_in = ?, check_out = ?, total_price = ?, updated_at = ? WHERE booking_id = ?",
        new_check_in,
        new_check_out,
        total,
        db.now(),
        booking_id,
    )
    return {
        "booking_id": booking_id,
        "check_in": new_check_in,
        "check_out": new_check_out,
        "total_price": total,
        "price_difference": round(total - booking["total_price"], 2),
    }


@tool(writes=True)
def cancel_booking(db: Db, booking_id: str) -> dict:
    """Cancel a confirmed booking under the hotel's cancellation policy; returns the refund.

    Args:
        booking_id: The booking to cancel, e.g. "BK-2041".
    """
    booking = _own_booking(db, booking_id)
    if booking["status"] != "confirmed":
        raise ToolError(f"booking {booking_id} is {booking['status']} and cannot be cancelled")
    if booking["check_out"] <= db.today():
        raise ToolError(f"the stay of booking {booking_id} is already over")
    refund = _refund(db, booking)
    db.execute(
        "UPDATE bookings SET status = 'cancelled', refund_amount = ?, updated_at = ? WHERE booking_id = ?",
        refund,
        db.now(),
        booking_id,
    )
    nights = _nights(booking["check_in"], booking["check_out"], booking["check_in"])
    _set_rooms(db, booking["room_type_id"], [n for n in nights if n >= db.today()], +1)
    return {
        "booking_id": booking_id,
        "status": "cancelled",
        "refund_amount": refund,
        "charged": round(booking["total_price"] - refund, 2),
    }


@tool(writes=True)
def update_special_requests(db: Db, booking_id: str, special_requests: str) -> dict:
    """Replace the special requests sent to the hotel for a confirmed booking.

    Args:
        booking_id: The booking, e.g. "BK-2041".
        special_requests: The full new request text (empty to clear).
    """
    booking = _own_booking(db, booking_id)
    if booking["status"] != "confirmed":
        raise ToolError(f"booking {booking_id} is {booking['status']}; requests can no longer be changed")
    if len(special_requests) > 500:
        raise ToolError("special requests are limited to 500 characters")
    db.execute(
        "UPDATE bookings SET special_requests = ?, updated_at = ? WHERE booking_id = ?",
        special_requests.strip(),
        db.now(),
        booking_id,
    )
    return {"booking_id": booking_id, "special_requests": special_requests.strip()}


@tool
def list_reviews(db: Db, hotel_id: str, min_rating: int | None = None) -> list[dict]:
    """Guest reviews of a hotel, newest first.

    Args:
        hotel_id: The hotel, e.g. "HTL-103".
        min_rating: Only reviews with at least this rating (1-5).
    """
    if db.one("SELECT 1 FROM hotels WHERE hotel_id = ?", hotel_id) is None:
        raise ToolError(f"no hotel {hotel_id}")
    return db.all(
        "SELECT review_id, rating, title, body, created_at FROM reviews WHERE hotel_id = ? AND rating >= ? "
        "ORDER BY created_at DESC",
        hotel_id,
        min_rating or 1,
    )


@tool(writes=True)
def write_review(db: Db, booking_id: str, rating: int, title: str, body: str = "") -> dict:
    """Review a completed stay (one review per booking).

    Args:
        booking_id: The completed booking, e.g. "BK-2046".
        rating: 1 (poor) to 5 (excellent).
        title: A short headline.
        body: The review text.
    """
    booking = _own_booking(db, booking_id)
    if booking["status"] != "completed":
        raise ToolError(f"booking {booking_id} is {booking['status']}; only completed stays can be reviewed")
    if not 1 <= rating <= 5:
        raise ToolError("rating must be between 1 and 5")
    if not title.strip():
        raise ToolError("a review needs a title")
    if db.one("SELECT 1 FROM reviews WHERE booking_id = ?", booking_id):
        raise ToolError(f"booking {booking_id} has already been reviewed")
    review_id = db.new_id("RV")
    db.execute(
        "INSERT INTO reviews VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        review_id,
        booking_id,
        booking["hotel_id"],
        db.user_id,
        rating,
        title.strip(),
        body.strip(),
        db.now(),
    )
    return {
        "review_id": review_id,
        "booking_id": booking_id,
        "hotel_id": booking["hotel_id"],
        "rating": rating,
    }
