-- Email: mailboxes, contacts, threads, messages, labels and drafts.
CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL
);

CREATE TABLE mailboxes (
    mailbox_id TEXT PRIMARY KEY,
    user_id INTEGER NOT NULL UNIQUE REFERENCES users(id),
    address TEXT NOT NULL UNIQUE,
    display_name TEXT NOT NULL,
    signature TEXT NOT NULL DEFAULT ''
);

CREATE TABLE contacts (
    contact_id TEXT PRIMARY KEY,
    mailbox_id TEXT NOT NULL REFERENCES mailboxes(mailbox_id),
    name TEXT NOT NULL,
    email TEXT NOT NULL,
    company TEXT NOT NULL DEFAULT '',
    is_favorite INTEGER NOT NULL DEFAULT 0 CHECK (is_favorite IN (0, 1)),
    UNIQUE (mailbox_id, email)
);

CREATE TABLE labels (
    label_id TEXT PRIMARY KEY,
    mailbox_id TEXT NOT NULL REFERENCES mailboxes(mailbox_id),
    name TEXT NOT NULL,
    color TEXT NOT NULL DEFAULT 'gray',
    UNIQUE (mailbox_id, name)
);

CREATE TABLE threads (
    thread_id TEXT PRIMARY KEY,
    mailbox_id TEXT NOT NULL REFERENCES mailboxes(mailbox_id),
    subject TEXT NOT NULL
);

CREATE TABLE messages (
    message_id TEXT PRIMARY KEY,
    mailbox_id TEXT NOT NULL REFERENCES mailboxes(mailbox_id),
    thread_id TEXT NOT NULL REFERENCES threads(thread_id),
    folder TEXT NOT NULL CHECK (folder IN ('inbox', 'sent', 'archive', 'trash', 'spam')),
    from_name TEXT NOT NULL,
    from_addr TEXT NOT NULL,
    to_addrs TEXT NOT NULL,            -- comma-separated
    cc_addrs TEXT NOT NULL DEFAULT '',
    subject TEXT NOT NULL,
    body TEXT NOT NULL,
    sent_at TEXT NOT NULL,
    is_read INTEGER NOT NULL DEFAULT 0 CHECK (is_read IN (0, 1)),
    is_starred INTEGER NOT NULL DEFAULT 0 CHECK (is_starred IN (0, 1)),
    in_reply_to TEXT REFERENCES messages(message_id)
);

CREATE TABLE message_labels (
    message_id TEXT NOT NULL REFERENCES messages(message_id),
    label_id TEXT NOT NULL REFERENCES labels(label_id),
    PRIMARY KEY (message_id, label_id)
);

CREATE TABLE drafts (
    draft_id TEXT PRIMARY KEY,
    mailbox_id TEXT NOT NULL REFERENCES mailboxes(mailbox_id),
    thread_id TEXT REFERENCES threads(thread_id),
    in_reply_to TEXT REFERENCES messages(message_id),
    to_addrs TEXT NOT NULL DEFAULT '',
    cc_addrs TEXT NOT NULL DEFAULT '',
    subject TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL DEFAULT '',
    updated_at TEXT NOT NULL
);

-- Searches filter one mailbox's folders by sender and return the newest first: the index covers
-- that scan, so only the matching messages are read from the table.
CREATE INDEX messages_by_mailbox ON messages (mailbox_id, sent_at, message_id, folder, from_name, from_addr, is_read);
CREATE INDEX messages_by_thread ON messages (thread_id, sent_at);
CREATE INDEX message_labels_by_label ON message_labels (label_id);
