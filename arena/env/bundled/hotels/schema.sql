-- StayWell Hotels: hotels, room types, nightly availability, bookings, guests, reviews.
CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    phone TEXT,
    loyalty_tier TEXT NOT NULL DEFAULT 'member' CHECK (loyalty_tier IN ('member', 'silver', 'gold', 'platinum')),
    loyalty_points INTEGER NOT NULL DEFAULT 0 CHECK (loyalty_points >= 0)
);

CREATE TABLE hotels (
    hotel_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    city TEXT NOT NULL,
    country TEXT NOT NULL,
    address TEXT NOT NULL,
    stars INTEGER NOT NULL CHECK (stars BETWEEN 1 AND 5),
    free_cancel_hours INTEGER NOT NULL CHECK (free_cancel_hours >= 0),
    amenities TEXT NOT NULL DEFAULT ''
);

CREATE TABLE room_types (
    room_type_id TEXT PRIMARY KEY,
    hotel_id TEXT NOT NULL REFERENCES hotels(hotel_id),
    name TEXT NOT NULL,
    beds TEXT NOT NULL,
    capacity INTEGER NOT NULL CHECK (capacity BETWEEN 1 AND 8),
    refundable INTEGER NOT NULL DEFAULT 1 CHECK (refundable IN (0, 1)),
    base_rate REAL NOT NULL CHECK (base_rate > 0)
);

CREATE TABLE availability (
    room_type_id TEXT NOT NULL REFERENCES room_types(room_type_id),
    night TEXT NOT NULL,
    rooms_left INTEGER NOT NULL CHECK (rooms_left >= 0),
    rate REAL NOT NULL CHECK (rate > 0),
    PRIMARY KEY (room_type_id, night)
);

CREATE TABLE bookings (
    booking_id TEXT PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id),
    hotel_id TEXT NOT NULL REFERENCES hotels(hotel_id),
    room_type_id TEXT NOT NULL REFERENCES room_types(room_type_id),
    check_in TEXT NOT NULL,
    check_out TEXT NOT NULL,
    guests INTEGER NOT NULL CHECK (guests >= 1),
    status TEXT NOT NULL CHECK (status IN ('confirmed', 'cancelled', 'completed', 'no_show')),
    total_price REAL NOT NULL CHECK (total_price >= 0),
    refund_amount REAL NOT NULL DEFAULT 0 CHECK (refund_amount >= 0),
    special_requests TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    CHECK (check_out > check_in)
);

CREATE TABLE booking_guests (
    booking_id TEXT NOT NULL REFERENCES bookings(booking_id),
    position INTEGER NOT NULL CHECK (position >= 1),
    full_name TEXT NOT NULL,
    PRIMARY KEY (booking_id, position)
);

CREATE TABLE reviews (
    review_id TEXT PRIMARY KEY,
    booking_id TEXT NOT NULL UNIQUE REFERENCES bookings(booking_id),
    hotel_id TEXT NOT NULL REFERENCES hotels(hotel_id),
    user_id INTEGER NOT NULL REFERENCES users(id),
    rating INTEGER NOT NULL CHECK (rating BETWEEN 1 AND 5),
    title TEXT NOT NULL,
    body TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL
);
