"""Tools of the calendar environment: events, invitations, people, rooms and free slots."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from arena.env import Db, ToolError, tool

MAX_EVENT_HOURS = 8
MAX_GUESTS = 50


def _dt(value: str, what: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ToolError(f"{what} must be a local time like 2025-06-04T10:00:00, got {value!r}") from None
    return parsed.replace(tzinfo=None, microsecond=0)


def _iso(value: datetime) -> str:
    return value.isoformat(timespec="seconds")


def _day(value: str, what: str) -> str:
    try:
        return datetime.strptime(value, "%Y-%m-%d").date().isoformat()
    except ValueError:
        raise ToolError(f"{what} must be a date like 2025-06-04, got {value!r}") from None


def _check_window(db: Db, start: str, end: str) -> tuple[str, str]:
    s, e = _dt(start, "start"), _dt(end, "end")
    if e <= s:
        raise ToolError("end must be after start")
    if s < _dt(db.now(), "now"):
        raise ToolError(f"{_iso(s)} is in the past (now is {db.now()})")
    if s.date() != e.date():
        raise ToolError("an event must start and end on the same day")
    if e - s > timedelta(hours=MAX_EVENT_HOURS):
        raise ToolError(f"an event lasts at most {MAX_EVENT_HOURS} hours")
    return _iso(s), _iso(e)


def _busy(db: Db, user_id: int, start: str, end: str, exclude: str = "") -> list[dict]:
    """Events that keep a person busy (organized, or invited and not declined) overlapping [start, end)."""
    return db.all(
        "SELECT DISTINCT e.event_id, e.title, e.start_at, e.end_at FROM events e "
        "LEFT JOIN attendees a ON a.event_id = e.event_id AND a.user_id = ? "
        "WHERE e.status = 'confirmed' AND e.event_id != ? AND e.start_at < ? AND e.end_at > ? "
        "AND (e.organizer_id = ? OR (a.user_id IS NOT NULL AND a.response != 'declined')) ORDER BY e.start_at",
        user_id,
        exclude,
        end,
        start,
        user_id,
    )


def _room_free(db: Db, room_id: str, start: str, end: str, exclude: str = "") -> dict | None:
    return db.one(
        "SELECT event_id, title FROM events WHERE room_id = ? AND status = 'confirmed' AND event_id != ? "
        "AND start_at < ? AND end_at > ?",
        room_id,
        exclude,
        end,
        start,
    )


def _visible_event(db: Db, event_id: str) -> dict:
    event = db.one(
        "SELECT e.* FROM events e WHERE e.event_id = ? AND (e.organizer_id = ? OR EXISTS "
        "(SELECT 1 FROM attendees a WHERE a.event_id = e.event_id AND a.user_id = ?))",
        event_id,
        db.user_id,
        db.user_id,
    )
    if event is None:
        raise ToolError(f"no event {event_id} on your calendars")
    return event


def _organized_event(db: Db, event_id: str) -> dict:
    event = _visible_event(db, event_id)
    if event["organizer_id"] != db.user_id:
        raise ToolError(f"event {event_id} is organized by someone else; you can only answer its invitation")
    if event["status"] == "cancelled":
        raise ToolError(f"event {event_id} is cancelled")
    return event


def _people(db: Db, emails: list[str]) -> list[dict]:
    found = []
    for email in dict.fromkeys(e.strip().lower() for e in emails):
        person = db.one("SELECT id, name, email FROM users WHERE lower(email) = ?", email)
        if person is None:
            raise ToolError(f"nobody in the directory has the email {email!r}")
        if person["id"] == db.user_id:
            raise ToolError("you are the organizer; do not invite yourself")
        found.append(person)
    return found


def _check_room(db: Db, room_id: str, start: str, end: str, people: int, exclude: str = "") -> dict:
    room = db.one("SELECT * FROM rooms WHERE room_id = ?", room_id)
    if room is None:
        raise ToolError(f"no room {room_id}")
    if room["capacity"] < people:
        raise ToolError(f"room {room['name']} holds {room['capacity']} people, the event has {people}")
    clash = _room_free(db, room_id, start, end, exclude)
    if clash:
        raise ToolError(f"room {room['name']} is booked then ({clash['event_id']} {clash['title']})")
    return room


def _summary(db: Db, event: dict) -> dict:
    mine = db.one(
        "SELECT response FROM attendees WHERE event_id = ? AND user_id = ?", event["event_id"], db.user_id
    )
    room = db.one("SELECT name FROM rooms WHERE room_id = ?", event["room_id"]) if event["room_id"] else None
    org = db.one("SELECT name FROM users WHERE id = ?", event["organizer_id"])
    return {
        "event_id": event["event_id"],
        "title": event["title"],
        "start": event["start_at"],
        "end": event["end_at"],
        "status": event["status"],
        "organizer": org["name"] if org else None,
        "room": room["name"] if room else None,
        "location": event["location"],
        "my_response": "organizer"
        if event["organizer_id"] == db.user_id
        else (mine["response"] if mine else None),
    }


@tool
def list_calendars(db: Db) -> dict:
    """List the user's calendars."""
    rows = db.all(
        "SELECT calendar_id, name, color, is_primary FROM calendars WHERE owner_id = ? ORDER BY is_primary DESC, name",
        db.user_id,
    )
    for r in rows:
        r["is_primary"] = bool(r["is_primary"])
    return {"calendars": rows}


@tool
def list_events(
    db: Db, start_date: str, end_date: str = "", query: str = "", include_cancelled: bool = False
) -> dict:
    """List the events the user organizes or is invited to, between two dates (inclusive).

    Args:
        start_date: First day, e.g. "2025-06-03".
        end_date: Last day; empty for just start_date.
        query: Only events whose title contains this text.
        include_cancelled: Also list cancelled events.
    """
    first = _day(start_date, "start_date")
    last = _day(end_date, "end_date") if end_date else first
    if last < first:
        raise ToolError("end_date is before start_date")
    sql = (
        "SELECT e.* FROM events e WHERE (e.organizer_id = ? OR EXISTS (SELECT 1 FROM attendees a "
        "WHERE a.event_id = e.event_id AND a.user_id = ?)) AND substr(e.start_at, 1, 10) BETWEEN ? AND ?"
    )
    params: list = [db.user_id, db.user_id, first, last]
    if query.strip():
        sql += " AND e.title LIKE ?"
        params.append(f"%{query.strip()}%")
    if not include_cancelled:
        sql += " AND e.status = 'confirmed'"
    events = [_summary(db, e) for e in db.all(sql + " ORDER BY e.start_at, e.event_id", *params)]
    return {"events": events, "count": len(events)}


@tool
def get_event(db: Db, event_id: str) -> dict:
    """Get one event with its description, room and every guest's answer.

    Args:
        event_id: The event, e.g. "EVT-1011".
    """
    event = _visible_event(db, event_id)
    out = _summary(db, event)
    out["description"] = event["description"]
    out["calendar_id"] = event["calendar_id"]
    out["guests"] = db.all(
        "SELECT u.name, u.email, a.response FROM attendees a JOIN users u ON u.id = a.user_id "
        "WHERE a.event_id = ? ORDER BY u.name",
        event_id,
    )
    return out


@tool
def search_people(db: Db, query: str) -> dict:
    """Find colleagues in the company directory by name, email or department.

    Args:
        query: Part of a name, email or department, e.g. "alex".
    """
    if not query.strip():
        raise ToolError("query must not be empty")
    like = f"%{query.strip()}%"
    rows = db.all(
        "SELECT name, email, department, title FROM users WHERE name LIKE ? OR email LIKE ? OR department LIKE ? ORDER BY name",
        like,
        like,
        like,
    )
    return {"people": rows, "count": len(rows)}


@tool
def find_free_slots(
    db: Db, date: str, duration_minutes: int, attendee_emails: list[str] | None = None
) -> dict:
    """Find times on a day when the user and the given colleagues are all free within working hours.

    Slots start on the hour or half hour.

    Args:
        date: The day, e.g. "2025-06-05".
        duration_minutes: Meeting length in minutes (15 to 480).
        attendee_emails: Colleagues who must also be free.
    """
    day = _day(date, "date")
    if not 15 <= duration_minutes <= 480:
        raise ToolError("duration_minutes must be between 15 and 480")
    ids = [db.user_id] + [p["id"] for p in _people(db, attendee_emails or [])]
    weekday = datetime.fromisoformat(day).weekday()
    lo, hi = "00:00", "23:59"
    for uid in ids:
        hours = db.one(
            "SELECT start_time, end_time FROM working_hours WHERE user_id = ? AND weekday = ?", uid, weekday
        )
        if hours is None:
            name = db.one("SELECT name FROM users WHERE id = ?", uid)["name"]
            return {"date": day, "slots": [], "note": f"{name} does not work on that day"}
        lo, hi = max(lo, hours["start_time"]), min(hi, hours["end_time"])
    slots = []
    t = datetime.fromisoformat(f"{day}T{lo}:00")
    if t.minute % 30:
        t += timedelta(minutes=30 - t.minute % 30)
    end_of_day = datetime.fromisoformat(f"{day}T{hi}:00")
    now = _dt(db.now(), "now")
    step = timedelta(minutes=30)
    length = timedelta(minutes=duration_minutes)
    while t + length <= end_of_day:
        s, e = _iso(t), _iso(t + length)
        if t >= now and not any(_busy(db, uid, s, e) for uid in ids):
            slots.append({"start": s, "end": e})
        t += step
    return {"date": day, "slots": slots}


@tool
def list_rooms(db: Db, start: str, end: str, min_capacity: int = 1, video_only: bool = False) -> dict:
    """List meeting rooms that are free for a whole time window.

    Args:
        start: Window start, e.g. "2025-06-04T10:00:00".
        end: Window end.
        min_capacity: Only rooms holding at least this many people.
        video_only: Only rooms with video conferencing.
    """
    s, e = _iso(_dt(start, "start")), _iso(_dt(end, "end"))
    if e <= s:
        raise ToolError("end must be after start")
    sql = "SELECT room_id, name, building, floor, capacity, has_video FROM rooms WHERE capacity >= ?"
    if video_only:
        sql += " AND has_video = 1"
    rooms = []
    for room in db.all(sql + " ORDER BY capacity, name", min_capacity):
        if _room_free(db, room["room_id"], s, e) is None:
            room["has_video"] = bool(room["has_video"])
            rooms.append(room)
    return {"rooms": rooms, "count": len(rooms)}


@tool(writes=True)
def create_event(
    db: Db,
    title: str,
    start: str,
    end: str,
    attendee_emails: list[str] | None = None,
    room_id: str = "",
    calendar_id: str = "",
    location: str = "",
    description: str = "",
    allow_conflict: bool = False,
) -> dict:
    """Create an event organized by the user and invite guests.

    Args:
        title: Event title.
        start: Start time, e.g. "2025-06-04T10:00:00".
        end: End time, the same day.
        attendee_emails: Guests to invite, by company email.
        room_id: A meeting room to book, e.g. "RM-CEDAR"; empty for none.
        calendar_id: One of the user's calendars; empty for the primary one.
        location: Free-text location (e.g. "Zoom") when there is no room.
        description: Agenda or notes.
        allow_conflict: Create it even if it overlaps another of the user's events (only after the user agreed).
    """
    if not title.strip():
        raise ToolError("title must not be empty")
    s, e = _check_window(db, start, end)
    guests = _people(db, attendee_emails or [])
    if len(guests) > MAX_GUESTS:
        raise ToolError(f"at most {MAX_GUESTS} guests")
    if calendar_id:
        cal = db.one(
            "SELECT calendar_id FROM calendars WHERE calendar_id = ? AND owner_id = ?",
            calendar_id,
            db.user_id,
        )
        if cal is None:
            raise ToolError(f"no calendar {calendar_id} of yours")
    else:
        calendar_id = db.one(
            "SELECT calendar_id FROM calendars WHERE owner_id = ? AND is_primary = 1", db.user_id
        )["calendar_id"]
    if room_id:
        _check_room(db, room_id, s, e, len(guests) + 1)
    clashes = _busy(db, db.user_id, s, e)
    if clashes and not allow_conflict:
        listed = ", ".join(
            f"{c['event_id']} {c['title']} ({c['start_at'][11:16]}-{c['end_at'][11:16]})" for c in clashes
        )
        raise ToolError(f"this overlaps your events: {listed}")
    event_id = db.new_id("EVT")
    now = db.now()
    db.execute(
        "INSERT INTO events (event_id, calendar_id, organizer_id, title, description, start_at, end_at, location, room_id, "
        "status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'confirmed', ?, ?)",
        event_id,
        calendar_id,
        db.user_id,
        title.strip(),
        description,
        s,
        e,
        location,
        room_id or None,
        now,
        now,
    )
    for g in guests:
        db.execute(
            "INSERT INTO attendees (event_id, user_id, response) VALUES (?, ?, 'needs_action')",
            event_id,
            g["id"],
        )
    busy_guests = [g["name"] for g in guests if _busy(db, g["id"], s, e, exclude=event_id)]
    return {
        "event_id": event_id,
        "title": title.strip(),
        "start": s,
        "end": e,
        "room_id": room_id or None,
        "invited": [g["email"] for g in guests],
        "guests_with_conflicts": busy_guests,
    }


@tool(writes=True)
def respond_to_invitation(
    db: Db, event_id: str, response: Literal["accepted", "declined", "tentative"]
) -> dict:
    """Answer an invitation to an event organized by someone else.

    Args:
        event_id: The event, e.g. "EVT-1011".
        response: accepted, declined or tentative.
    """
    event = _visible_event(db, event_id)
    if event["organizer_id"] == db.user_id:
        raise ToolError(f"you organize {event_id}; there is no invitation to answer")
    if event["status"] == "cancelled":
        raise ToolError(f"event {event_id} was cancelled by its organizer")
    if event["end_at"] <= db.now():
        raise ToolError(f"event {event_id} is already over")
    db.execute(
        "UPDATE attendees SET response = ?, responded_at = ? WHERE event_id = ? AND user_id = ?",
        response,
        db.now(),
        event_id,
        db.user_id,
    )
    return {"event_id": event_id, "title": event["title"], "response": response}


@tool(writes=True)
def reschedule_event(db: Db, event_id: str, start: str, end: str, allow_conflict: bool = False) -> dict:
    """Move an event the user organizes to a new time; guests must answer again.

    Args:
        event_id: The event, e.g. "EVT-1012".
        start: New start, e.g. "2025-06-05T15:00:00".
        end: New end, the same day.
        allow_conflict: Move it even if it overlaps another of the user's events (only after the user agreed).
    """
    event = _organized_event(db, event_id)
    s, e = _check_window(db, start, end)
    if (s, e) == (event["start_at"], event["end_at"]):
        raise ToolError(f"event {event_id} is already at that time")
    if event["room_id"]:
        guests = db.one("SELECT COUNT(*) AS n FROM attendees WHERE event_id = ?", event_id)["n"]
        _check_room(db, event["room_id"], s, e, guests + 1, exclude=event_id)
    clashes = _busy(db, db.user_id, s, e, exclude=event_id)
    if clashes and not allow_conflict:
        listed = ", ".join(f"{c['event_id']} {c['title']}" for c in clashes)
        raise ToolError(f"the new time overlaps your events: {listed}")
    db.execute(
        "UPDATE events SET start_at = ?, end_at = ?, updated_at = ? WHERE event_id = ?",
        s,
        e,
        db.now(),
        event_id,
    )
    db.execute(
        "UPDATE attendees SET response = 'needs_action', responded_at = NULL WHERE event_id = ?", event_id
    )
    return {"event_id": event_id, "start": s, "end": e, "guests_reset": True}


@tool(writes=True)
def cancel_event(db: Db, event_id: str) -> dict:
    """Cancel an upcoming event the user organizes (guests are notified).

    Args:
        event_id: The event, e.g. "EVT-1016".
    """
    event = _organized_event(db, event_id)
    if event["start_at"] <= db.now():
        raise ToolError(f"event {event_id} has already started or is over")
    db.execute(
        "UPDATE events SET status = 'cancelled', updated_at = ? WHERE event_id = ?", db.now(), event_id
    )
    return {"event_id": event_id, "title": event["title"], "status": "cancelled"}


@tool(writes=True)
def add_attendees(db: Db, event_id: str, emails: list[str]) -> dict:
    """Invite more colleagues to an event the user organizes.

    Args:
        event_id: The event, e.g. "EVT-1015".
        emails: Company emails of the people to invite.
    """
    event = _organized_event(db, event_id)
    people = _people(db, emails)
    if not people:
        raise ToolError("give at least one email")
    new = [
        p
        for p in people
        if db.one("SELECT 1 FROM attendees WHERE event_id = ? AND user_id = ?", event_id, p["id"]) is None
    ]
    if not new:
        raise ToolError("everyone listed is already invited")
    if event["room_id"]:
        count = db.one("SELECT COUNT(*) AS n FROM attendees WHERE event_id = ?", event_id)["n"]
        room = db.one("SELECT name, capacity FROM rooms WHERE room_id = ?", event["room_id"])
        if count + len(new) + 1 > room["capacity"]:
            raise ToolError(
                f"room {room['name']} holds {room['capacity']} people; that would make {count + len(new) + 1}"
            )
    for p in new:
        db.execute(
            "INSERT INTO attendees (event_id, user_id, response) VALUES (?, ?, 'needs_action')",
            event_id,
            p["id"],
        )
    return {"event_id": event_id, "invited": [p["email"] for p in new]}


@tool(writes=True)
def remove_attendee(db: Db, event_id: str, email: str) -> dict:
    """Remove a guest from an event the user organizes.

    Args:
        event_id: The event, e.g. "EVT-1015".
        email: The guest's company email.
    """
    _organized_event(db, event_id)
    person = db.one("SELECT id, name FROM users WHERE lower(email) = lower(?)", email.strip())
    if person is None or not db.execute(
        "DELETE FROM attendees WHERE event_id = ? AND user_id = ?", event_id, person["id"]
    ):
        raise ToolError(f"{email} is not a guest of {event_id}")
    return {"event_id": event_id, "removed": email.strip().lower()}


@tool(writes=True)
def set_event_room(db: Db, event_id: str, room_id: str) -> dict:
    """Book a meeting room for an event the user organizes, replacing its current room.

    Args:
        event_id: The event, e.g. "EVT-1016".
        room_id: The room, e.g. "RM-CEDAR".
    """
    event = _organized_event(db, event_id)
    if event["room_id"] == room_id:
        raise ToolError(f"event {event_id} is already in that room")
    guests = db.one("SELECT COUNT(*) AS n FROM attendees WHERE event_id = ?", event_id)["n"]
    room = _check_room(db, room_id, event["start_at"], event["end_at"], guests + 1, exclude=event_id)
    db.execute(
        "UPDATE events SET room_id = ?, updated_at = ? WHERE event_id = ?", room_id, db.now(), event_id
    )
    return {"event_id": event_id, "room_id": room_id, "room": room["name"]}
