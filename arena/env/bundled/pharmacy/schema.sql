-- Pharmacy: account holders, patients, medications, pharmacies and stock, prescriptions,
-- refills and over-the-counter orders.
CREATE TABLE pharmacies (
    pharmacy_id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    street TEXT NOT NULL,
    city TEXT NOT NULL,
    zip TEXT NOT NULL,
    phone TEXT NOT NULL,
    opens TEXT NOT NULL,          -- HH:MM
    closes TEXT NOT NULL,
    delivers INTEGER NOT NULL CHECK (delivers IN (0, 1))
);

CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    address TEXT NOT NULL,
    preferred_pharmacy_id TEXT REFERENCES pharmacies(pharmacy_id)
);

CREATE TABLE patients (
    patient_id TEXT PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id),      -- the account that manages this patient
    name TEXT NOT NULL,
    date_of_birth TEXT NOT NULL,
    relation TEXT NOT NULL CHECK (relation IN ('self', 'spouse', 'child', 'parent')),
    allergies TEXT NOT NULL DEFAULT ''
);

CREATE TABLE medications (
    medication_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    generic_name TEXT NOT NULL,
    strength TEXT NOT NULL,
    form TEXT NOT NULL,
    requires_rx INTEGER NOT NULL CHECK (requires_rx IN (0, 1)),
    controlled_schedule INTEGER NOT NULL DEFAULT 0 CHECK (controlled_schedule IN (0, 2, 3, 4, 5)),
    unit_price REAL NOT NULL CHECK (unit_price > 0)
);

CREATE TABLE stock (
    pharmacy_id TEXT NOT NULL REFERENCES pharmacies(pharmacy_id),
    medication_id TEXT NOT NULL REFERENCES medications(medication_id),
    quantity INTEGER NOT NULL CHECK (quantity >= 0),
    PRIMARY KEY (pharmacy_id, medication_id)
);

CREATE TABLE prescriptions (
    rx_id TEXT PRIMARY KEY,
    patient_id TEXT NOT NULL REFERENCES patients(patient_id),
    medication_id TEXT NOT NULL REFERENCES medications(medication_id),
    pharmacy_id TEXT NOT NULL REFERENCES pharmacies(pharmacy_id),
    prescriber TEXT NOT NULL,
    directions TEXT NOT NULL,
    quantity INTEGER NOT NULL CHECK (quantity > 0),
    days_supply INTEGER NOT NULL CHECK (days_supply > 0),
    refills_remaining INTEGER NOT NULL CHECK (refills_remaining >= 0),
    written_on TEXT NOT NULL,
    expires_on TEXT NOT NULL,
    last_filled_on TEXT,
    status TEXT NOT NULL CHECK (status IN ('active', 'on_hold', 'cancelled')),
    CHECK (expires_on > written_on)
);

CREATE TABLE refills (
    refill_id TEXT PRIMARY KEY,
    rx_id TEXT NOT NULL REFERENCES prescriptions(rx_id),
    pharmacy_id TEXT NOT NULL REFERENCES pharmacies(pharmacy_id),
    quantity INTEGER NOT NULL CHECK (quantity > 0),
    copay REAL NOT NULL CHECK (copay >= 0),
    status TEXT NOT NULL CHECK (status IN ('requested', 'ready', 'picked_up', 'cancelled')),
    requested_at TEXT NOT NULL
);

CREATE TABLE orders (
    order_id TEXT PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id),
    pharmacy_id TEXT NOT NULL REFERENCES pharmacies(pharmacy_id),
    fulfillment TEXT NOT NULL CHECK (fulfillment IN ('pickup', 'delivery')),
    status TEXT NOT NULL CHECK (status IN ('placed', 'ready', 'completed', 'cancelled')),
    total REAL NOT NULL CHECK (total >= 0),
    created_at TEXT NOT NULL
);

CREATE TABLE order_items (
    order_id TEXT NOT NULL REFERENCES orders(order_id),
    medication_id TEXT NOT NULL REFERENCES medications(medication_id),
    quantity INTEGER NOT NULL CHECK (quantity BETWEEN 1 AND 10),
    unit_price REAL NOT NULL CHECK (unit_price > 0),
    PRIMARY KEY (order_id, medication_id)
);
