-- Food delivery: restaurants, menus, orders, payments, couriers and reviews.
CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    phone TEXT NOT NULL,
    member_since TEXT NOT NULL
);

CREATE TABLE addresses (
    address_id TEXT PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id),
    label TEXT NOT NULL,
    street TEXT NOT NULL,
    city TEXT NOT NULL,
    zip TEXT NOT NULL,
    instructions TEXT NOT NULL DEFAULT '',
    is_default INTEGER NOT NULL DEFAULT 0 CHECK (is_default IN (0, 1))
);

CREATE TABLE payment_methods (
    method_id TEXT PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id),
    kind TEXT NOT NULL CHECK (kind IN ('card', 'wallet', 'gift_card')),
    brand TEXT NOT NULL,
    last4 TEXT NOT NULL,
    is_default INTEGER NOT NULL DEFAULT 0 CHECK (is_default IN (0, 1))
);

CREATE TABLE restaurants (
    restaurant_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    cuisine TEXT NOT NULL,
    city TEXT NOT NULL,
    rating REAL NOT NULL CHECK (rating BETWEEN 0 AND 5),
    is_open INTEGER NOT NULL CHECK (is_open IN (0, 1)),
    delivery_fee REAL NOT NULL CHECK (delivery_fee >= 0),
    min_order REAL NOT NULL CHECK (min_order >= 0),
    prep_minutes INTEGER NOT NULL CHECK (prep_minutes > 0)
);

CREATE TABLE menu_items (
    item_id TEXT PRIMARY KEY,
    restaurant_id TEXT NOT NULL REFERENCES restaurants(restaurant_id),
    name TEXT NOT NULL,
    category TEXT NOT NULL,
    price REAL NOT NULL CHECK (price > 0),
    is_vegetarian INTEGER NOT NULL DEFAULT 0 CHECK (is_vegetarian IN (0, 1)),
    available INTEGER NOT NULL DEFAULT 1 CHECK (available IN (0, 1))
);

CREATE TABLE couriers (
    courier_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    vehicle TEXT NOT NULL CHECK (vehicle IN ('bike', 'scooter', 'car')),
    rating REAL NOT NULL CHECK (rating BETWEEN 0 AND 5)
);

CREATE TABLE orders (
    order_id TEXT PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id),
    restaurant_id TEXT NOT NULL REFERENCES restaurants(restaurant_id),
    address_id TEXT NOT NULL REFERENCES addresses(address_id),
    courier_id TEXT REFERENCES couriers(courier_id),
    status TEXT NOT NULL CHECK (status IN ('placed', 'preparing', 'out_for_delivery', 'delivered', 'cancelled')),
    subtotal REAL NOT NULL CHECK (subtotal >= 0),
    delivery_fee REAL NOT NULL CHECK (delivery_fee >= 0),
    tip REAL NOT NULL DEFAULT 0 CHECK (tip >= 0),
    total REAL NOT NULL CHECK (total >= 0),
    notes TEXT NOT NULL DEFAULT '',
    cancel_reason TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE order_items (
    order_id TEXT NOT NULL REFERENCES orders(order_id),
    item_id TEXT NOT NULL REFERENCES menu_items(item_id),
    quantity INTEGER NOT NULL CHECK (quantity BETWEEN 1 AND 20),
    unit_price REAL NOT NULL CHECK (unit_price > 0),
    PRIMARY KEY (order_id, item_id)
);

CREATE TABLE payments (
    payment_id TEXT PRIMARY KEY,
    order_id TEXT NOT NULL REFERENCES orders(order_id),
    method_id TEXT NOT NULL REFERENCES payment_methods(method_id),
    amount REAL NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('captured', 'refunded')),
    created_at TEXT NOT NULL
);

CREATE TABLE reviews (
    review_id TEXT PRIMARY KEY,
    order_id TEXT NOT NULL UNIQUE REFERENCES orders(order_id),
    user_id INTEGER NOT NULL REFERENCES users(id),
    restaurant_id TEXT NOT NULL REFERENCES restaurants(restaurant_id),
    rating INTEGER NOT NULL CHECK (rating BETWEEN 1 AND 5),
    comment TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL
);
