-- Aurora Air: airports, flights, fares, reservations, passengers, seats, baggage and charges.
CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    frequent_flyer_no TEXT UNIQUE,
    tier TEXT NOT NULL DEFAULT 'member' CHECK (tier IN ('member', 'silver', 'gold', 'platinum'))
);

CREATE TABLE airports (
    code TEXT PRIMARY KEY CHECK (length(code) = 3),
    name TEXT NOT NULL,
    city TEXT NOT NULL,
    country TEXT NOT NULL
);

CREATE TABLE flights (
    flight_id TEXT PRIMARY KEY,
    flight_number TEXT NOT NULL,
    origin TEXT NOT NULL REFERENCES airports(code),
    destination TEXT NOT NULL REFERENCES airports(code),
    depart_at TEXT NOT NULL,
    arrive_at TEXT NOT NULL,
    aircraft TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('scheduled', 'delayed', 'cancelled', 'departed', 'landed')),
    CHECK (origin <> destination),
    CHECK (arrive_at > depart_at),
    UNIQUE (flight_number, depart_at)
);

CREATE TABLE fares (
    fare_id TEXT PRIMARY KEY,
    flight_id TEXT NOT NULL REFERENCES flights(flight_id),
    cabin TEXT NOT NULL CHECK (cabin IN ('economy', 'business')),
    fare_family TEXT NOT NULL CHECK (fare_family IN ('basic', 'standard', 'flex')),
    price REAL NOT NULL CHECK (price > 0),
    seats_left INTEGER NOT NULL CHECK (seats_left >= 0),
    change_fee REAL NOT NULL DEFAULT 0 CHECK (change_fee >= 0),
    refundable INTEGER NOT NULL DEFAULT 0 CHECK (refundable IN (0, 1)),
    bags_included INTEGER NOT NULL DEFAULT 0 CHECK (bags_included BETWEEN 0 AND 3)
);

CREATE TABLE seats (
    flight_id TEXT NOT NULL REFERENCES flights(flight_id),
    seat_no TEXT NOT NULL,
    cabin TEXT NOT NULL CHECK (cabin IN ('economy', 'business')),
    position TEXT NOT NULL CHECK (position IN ('window', 'middle', 'aisle')),
    extra_legroom INTEGER NOT NULL DEFAULT 0 CHECK (extra_legroom IN (0, 1)),
    fee REAL NOT NULL DEFAULT 0 CHECK (fee >= 0),
    blocked INTEGER NOT NULL DEFAULT 0 CHECK (blocked IN (0, 1)),  -- taken by a traveller outside this account system
    PRIMARY KEY (flight_id, seat_no)
);

CREATE TABLE reservations (
    reservation_id TEXT PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id),
    flight_id TEXT NOT NULL REFERENCES flights(flight_id),
    fare_id TEXT NOT NULL REFERENCES fares(fare_id),
    status TEXT NOT NULL CHECK (status IN ('confirmed', 'cancelled', 'flown')),
    booked_at TEXT NOT NULL,
    total_paid REAL NOT NULL CHECK (total_paid >= 0),
    refund_amount REAL NOT NULL DEFAULT 0 CHECK (refund_amount >= 0),
    updated_at TEXT NOT NULL
);

CREATE TABLE passengers (
    passenger_id TEXT PRIMARY KEY,
    reservation_id TEXT NOT NULL REFERENCES reservations(reservation_id),
    first_name TEXT NOT NULL,
    last_name TEXT NOT NULL,
    seat_no TEXT,
    checked_bags INTEGER NOT NULL DEFAULT 0 CHECK (checked_bags BETWEEN 0 AND 3)
);

CREATE TABLE charges (
    charge_id TEXT PRIMARY KEY,
    reservation_id TEXT NOT NULL REFERENCES reservations(reservation_id),
    kind TEXT NOT NULL CHECK (kind IN ('fare', 'change_fee', 'fare_difference', 'bag_fee', 'seat_fee', 'refund')),
    amount REAL NOT NULL,
    created_at TEXT NOT NULL
);
