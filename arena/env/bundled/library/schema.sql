-- Metro Public Library: branches, catalogue, copies, members, loans, holds, fines and payments.
CREATE TABLE branches (
    branch_id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    address TEXT NOT NULL,
    hours TEXT NOT NULL
);

CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    card_number TEXT NOT NULL UNIQUE CHECK (length(card_number) = 14),
    email TEXT NOT NULL,
    membership TEXT NOT NULL CHECK (membership IN ('standard', 'student', 'senior', 'staff')),
    home_branch_id TEXT NOT NULL REFERENCES branches(branch_id),
    status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended'))
);

CREATE TABLE books (
    book_id TEXT PRIMARY KEY,
    isbn TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    author TEXT NOT NULL,
    year INTEGER NOT NULL CHECK (year BETWEEN 1400 AND 2100),
    genre TEXT NOT NULL,
    language TEXT NOT NULL DEFAULT 'English'
);

CREATE TABLE copies (
    copy_id TEXT PRIMARY KEY,
    book_id TEXT NOT NULL REFERENCES books(book_id),
    branch_id TEXT NOT NULL REFERENCES branches(branch_id),
    status TEXT NOT NULL CHECK (status IN ('available', 'on_loan', 'on_hold_shelf', 'in_transit', 'repair', 'lost')),
    shelf TEXT NOT NULL
);

CREATE TABLE loans (
    loan_id TEXT PRIMARY KEY,
    copy_id TEXT NOT NULL REFERENCES copies(copy_id),
    user_id INTEGER NOT NULL REFERENCES users(id),
    borrowed_on TEXT NOT NULL,
    due_on TEXT NOT NULL,
    returned_on TEXT,
    renewals INTEGER NOT NULL DEFAULT 0 CHECK (renewals BETWEEN 0 AND 2),
    CHECK (due_on > borrowed_on)
);

CREATE TABLE holds (
    hold_id TEXT PRIMARY KEY,
    book_id TEXT NOT NULL REFERENCES books(book_id),
    user_id INTEGER NOT NULL REFERENCES users(id),
    pickup_branch_id TEXT NOT NULL REFERENCES branches(branch_id),
    placed_at TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('waiting', 'ready', 'fulfilled', 'cancelled', 'expired')),
    copy_id TEXT REFERENCES copies(copy_id),
    ready_until TEXT
);

CREATE TABLE payments (
    payment_id TEXT PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id),
    amount REAL NOT NULL CHECK (amount > 0),
    method TEXT NOT NULL CHECK (method IN ('card', 'paypal', 'cash')),
    paid_at TEXT NOT NULL
);

CREATE TABLE fines (
    fine_id TEXT PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id),
    loan_id TEXT REFERENCES loans(loan_id),
    amount REAL NOT NULL CHECK (amount > 0),
    reason TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('unpaid', 'paid', 'waived')),
    created_at TEXT NOT NULL,
    payment_id TEXT REFERENCES payments(payment_id),
    CHECK ((status = 'paid') = (payment_id IS NOT NULL))
);

-- Availability and holds are looked up per book on every catalog search.
CREATE INDEX copies_by_book ON copies (book_id, status, branch_id);
CREATE INDEX holds_by_book ON holds (book_id, status);
CREATE INDEX loans_by_copy ON loans (copy_id, returned_on);
CREATE INDEX books_by_title ON books (title, book_id, author, year, genre);
