-- Calendar: people, calendars, events, attendees (invitations and RSVPs), rooms, working hours.
CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    department TEXT NOT NULL,
    title TEXT NOT NULL
);

CREATE TABLE working_hours (
    user_id INTEGER NOT NULL REFERENCES users(id),
    weekday INTEGER NOT NULL CHECK (weekday BETWEEN 0 AND 6),  -- 0 = Monday
    start_time TEXT NOT NULL,                                 -- HH:MM
    end_time TEXT NOT NULL,
    PRIMARY KEY (user_id, weekday),
    CHECK (end_time > start_time)
);

CREATE TABLE rooms (
    room_id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    building TEXT NOT NULL,
    floor INTEGER NOT NULL,
    capacity INTEGER NOT NULL CHECK (capacity > 0),
    has_video INTEGER NOT NULL CHECK (has_video IN (0, 1))
);

CREATE TABLE calendars (
    calendar_id TEXT PRIMARY KEY,
    owner_id INTEGER NOT NULL REFERENCES users(id),
    name TEXT NOT NULL,
    color TEXT NOT NULL,
    is_primary INTEGER NOT NULL DEFAULT 0 CHECK (is_primary IN (0, 1))
);

CREATE TABLE events (
    event_id TEXT PRIMARY KEY,
    calendar_id TEXT NOT NULL REFERENCES calendars(calendar_id),
    organizer_id INTEGER NOT NULL REFERENCES users(id),
    title TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    start_at TEXT NOT NULL,                                   -- YYYY-MM-DDTHH:MM:SS, local time
    end_at TEXT NOT NULL,
    location TEXT NOT NULL DEFAULT '',
    room_id TEXT REFERENCES rooms(room_id),
    status TEXT NOT NULL DEFAULT 'confirmed' CHECK (status IN ('confirmed', 'cancelled')),
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    CHECK (end_at > start_at)
);

CREATE TABLE attendees (
    event_id TEXT NOT NULL REFERENCES events(event_id),
    user_id INTEGER NOT NULL REFERENCES users(id),
    response TEXT NOT NULL DEFAULT 'needs_action'
        CHECK (response IN ('needs_action', 'accepted', 'declined', 'tentative')),
    responded_at TEXT,
    PRIMARY KEY (event_id, user_id)
);
