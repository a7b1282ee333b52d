-- Banking: customers, accounts, transactions, payees, transfers and cards.
CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    per_transfer_limit REAL NOT NULL CHECK (per_transfer_limit > 0),     -- payments to payees
    daily_transfer_limit REAL NOT NULL CHECK (daily_transfer_limit > 0)  -- payments to payees per day
);

CREATE TABLE accounts (
    account_id TEXT PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id),
    kind TEXT NOT NULL CHECK (kind IN ('checking', 'savings', 'credit_card')),
    nickname TEXT NOT NULL,
    last4 TEXT NOT NULL,
    balance REAL NOT NULL,                  -- negative on a credit card = amount owed
    overdraft_limit REAL NOT NULL DEFAULT 0 CHECK (overdraft_limit >= 0),
    credit_limit REAL NOT NULL DEFAULT 0 CHECK (credit_limit >= 0),
    status TEXT NOT NULL CHECK (status IN ('active', 'frozen', 'closed')),
    opened_on TEXT NOT NULL
);

CREATE TABLE payees (
    payee_id TEXT PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id),
    name TEXT NOT NULL,
    bank TEXT NOT NULL,
    account_number TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('person', 'business')),
    created_at TEXT NOT NULL
);

CREATE TABLE transactions (
    txn_id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts(account_id),
    posted_at TEXT NOT NULL,
    amount REAL NOT NULL CHECK (amount != 0),   -- negative = money out
    description TEXT NOT NULL,
    category TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('posted', 'pending'))
);

CREATE TABLE transfers (
    transfer_id TEXT PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id),
    from_account_id TEXT NOT NULL REFERENCES accounts(account_id),
    to_account_id TEXT REFERENCES accounts(account_id),
    payee_id TEXT REFERENCES payees(payee_id),
    amount REAL NOT NULL CHECK (amount > 0),
    memo TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL CHECK (status IN ('completed', 'scheduled', 'cancelled')),
    scheduled_for TEXT NOT NULL,            -- YYYY-MM-DD
    created_at TEXT NOT NULL,
    CHECK ((to_account_id IS NULL) != (payee_id IS NULL))
);

CREATE TABLE cards (
    card_id TEXT PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users(id),
    account_id TEXT NOT NULL REFERENCES accounts(account_id),
    kind TEXT NOT NULL CHECK (kind IN ('debit', 'credit')),
    last4 TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'frozen', 'cancelled')),
    expires TEXT NOT NULL,                  -- YYYY-MM
    daily_limit REAL NOT NULL CHECK (daily_limit >= 0),
    online_payments INTEGER NOT NULL DEFAULT 1 CHECK (online_payments IN (0, 1))
);
