-- Shopwise: products and their variants (SKUs with stock), carts, orders, tracking, returns and exchanges.
CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    member_since TEXT NOT NULL,
    tier TEXT NOT NULL DEFAULT 'regular' CHECK (tier IN ('regular', 'plus'))
);

CREATE TABLE addresses (
    address_id TEXT PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id),
    label TEXT NOT NULL,
    recipient TEXT NOT NULL,
    line1 TEXT NOT NULL,
    city TEXT NOT NULL,
    state TEXT NOT NULL,
    zip TEXT NOT NULL,
    country TEXT NOT NULL DEFAULT 'US',
    is_default INTEGER NOT NULL DEFAULT 0 CHECK (is_default IN (0, 1))
);

CREATE TABLE products (
    product_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    brand TEXT NOT NULL,
    category TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    returnable INTEGER NOT NULL DEFAULT 1 CHECK (returnable IN (0, 1)),
    return_window_days INTEGER NOT NULL DEFAULT 30 CHECK (return_window_days >= 0)
);

CREATE TABLE skus (
    sku TEXT PRIMARY KEY,
    product_id TEXT NOT NULL REFERENCES products(product_id),
    color TEXT NOT NULL,
    size TEXT NOT NULL,
    price REAL NOT NULL CHECK (price > 0),
    stock INTEGER NOT NULL CHECK (stock >= 0)
);

CREATE TABLE cart_items (
    user_id INTEGER NOT NULL REFERENCES users(id),
    sku TEXT NOT NULL REFERENCES skus(sku),
    quantity INTEGER NOT NULL CHECK (quantity BETWEEN 1 AND 10),
    added_at TEXT NOT NULL,
    PRIMARY KEY (user_id, sku)
);

CREATE TABLE orders (
    order_id TEXT PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id),
    address_id TEXT NOT NULL REFERENCES addresses(address_id),
    status TEXT NOT NULL CHECK (status IN ('placed', 'processing', 'shipped', 'delivered', 'cancelled')),
    placed_at TEXT NOT NULL,
    shipped_at TEXT,
    delivered_at TEXT,
    carrier TEXT,
    tracking_number TEXT,
    subtotal REAL NOT NULL CHECK (subtotal >= 0),
    shipping_fee REAL NOT NULL DEFAULT 0 CHECK (shipping_fee >= 0),
    total REAL NOT NULL CHECK (total >= 0),
    payment_method TEXT NOT NULL CHECK (payment_method IN ('card', 'paypal', 'gift_card')),
    updated_at TEXT NOT NULL
);

CREATE TABLE order_items (
    item_id TEXT PRIMARY KEY,
    order_id TEXT NOT NULL REFERENCES orders(order_id),
    sku TEXT NOT NULL REFERENCES skus(sku),
    quantity INTEGER NOT NULL CHECK (quantity >= 1),
    unit_price REAL NOT NULL CHECK (unit_price >= 0)
);

CREATE TABLE tracking_events (
    event_id INTEGER PRIMARY KEY,
    order_id TEXT NOT NULL REFERENCES orders(order_id),
    at TEXT NOT NULL,
    location TEXT NOT NULL,
    description TEXT NOT NULL
);

CREATE TABLE returns (
    return_id TEXT PRIMARY KEY,
    order_id TEXT NOT NULL REFERENCES orders(order_id),
    item_id TEXT NOT NULL REFERENCES order_items(item_id),
    quantity INTEGER NOT NULL CHECK (quantity >= 1),
    kind TEXT NOT NULL CHECK (kind IN ('refund', 'exchange')),
    exchange_sku TEXT REFERENCES skus(sku),
    reason TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('requested', 'approved', 'received', 'refunded', 'rejected')),
    refund_amount REAL NOT NULL DEFAULT 0 CHECK (refund_amount >= 0),
    created_at TEXT NOT NULL,
    CHECK ((kind = 'exchange') = (exchange_sku IS NOT NULL))
);

-- Product searches list each product's SKUs.
CREATE INDEX skus_by_product ON skus (product_id, price);
