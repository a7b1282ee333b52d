"""Tools of the email environment: search, read, send, reply, drafts, labels, archive and trash."""

from __future__ import annotations

import re

from arena.env import Db, ToolError, tool

MAX_RECIPIENTS = 20
_EMAIL = re.compile(r"^[A-Za-z0-9._%+'-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}$")
FOLDERS = ("inbox", "sent", "archive", "trash", "spam")


def _mailbox(db: Db) -> dict:
    box = db.one("SELECT * FROM mailboxes WHERE user_id = ?", db.user_id)
    if box is None:
        raise ToolError("you have no mailbox")
    return box


def _addresses(values: list[str] | None, what: str) -> list[str]:
    out: list[str] = []
    for raw in values or []:
        addr = raw.strip().lower()
        if not _EMAIL.match(addr):
            raise ToolError(f"invalid email address in {what}: {raw!r}")
        if addr not in out:
            out.append(addr)
    return out


def _check_recipients(to: list[str], cc: list[str]) -> None:
    if not to:
        raise ToolError("at least one recipient is needed in to")
    if len(to) + len(cc) > MAX_RECIPIENTS:
        raise ToolError(f"at most {MAX_RECIPIENTS} recipients per message")


def _own_message(db: Db, message_id: str) -> dict:
    box = _mailbox(db)
    msg = db.one(
        "SELECT * FROM messages WHERE message_id = ? AND mailbox_id = ?", message_id, box["mailbox_id"]
    )
    if msg is None:
        raise ToolError(f"no message {message_id} in your mailbox")
    return msg


def _own_messages(db: Db, message_ids: list[str]) -> list[dict]:
    if not message_ids:
        raise ToolError("give at least one message id")
    return [_own_message(db, mid) for mid in dict.fromkeys(message_ids)]


def _label(db: Db, name: str) -> dict:
    box = _mailbox(db)
    lab = db.one(
        "SELECT * FROM labels WHERE mailbox_id = ? AND lower(name) = lower(?)",
        box["mailbox_id"],
        name.strip(),
    )
    if lab is None:
        raise ToolError(f"no label named {name!r}; create it first")
    return lab


def _labels_of(db: Db, message_id: str) -> list[str]:
    return [
        r["name"]
        for r in db.all(
            "SELECT l.name FROM message_labels ml JOIN labels l ON l.label_id = ml.label_id WHERE ml.message_id = ? ORDER BY l.name",
            message_id,
        )
    ]


SUMMARY_COLUMNS = "m.message_id, m.thread_id, m.folder, m.from_name, m.from_addr, m.subject, m.sent_at, m.is_read, m.is_starred"


def _labels_by_message(db: Db, message_ids: list[str]) -> dict[str, list[str]]:
    """Label names of many messages in one query (a search lists up to 100)."""
    out: dict[str, list[str]] = {i: [] for i in message_ids}
    if message_ids:
        marks = ", ".join("?" * len(message_ids))
        for r in db.all(
            "SELECT ml.message_id, l.name FROM message_labels ml JOIN labels l ON l.label_id = ml.label_id "
            f"WHERE ml.message_id IN ({marks}) ORDER BY l.name",
            *message_ids,
        ):
            out[r["message_id"]].append(r["name"])
    return out


def _summary(db: Db, m: dict, labels: list[str] | None = None) -> dict:
    return {
        "message_id": m["message_id"],
        "thread_id": m["thread_id"],
        "folder": m["folder"],
        "from": f"{m['from_name']} <{m['from_addr']}>",
        "subject": m["subject"],
        "sent_at": m["sent_at"],
        "is_read": bool(m["is_read"]),
        "is_starred": bool(m["is_starred"]),
        "labels": _labels_of(db, m["message_id"]) if labels is None else labels,
    }


def _split(value: str) -> list[str]:
    return [a.strip() for a in value.split(",") if a.strip()]


def _store_sent(
    db: Db,
    box: dict,
    thread_id: str,
    to: list[str],
    cc: list[str],
    subject: str,
    body: str,
    reply_to: str | None,
) -> str:
    message_id = db.new_id("MSG")
    db.execute(
        "INSERT INTO messages (message_id, mailbox_id, thread_id, folder, from_name, from_addr, to_addrs, cc_addrs, subject, "
        "body, sent_at, is_read, is_starred, in_reply_to) VALUES (?, ?, ?, 'sent', ?, ?, ?, ?, ?, ?, ?, 1, 0, ?)",
        message_id,
        box["mailbox_id"],
        thread_id,
        box["display_name"],
        box["address"],
        ", ".join(to),
        ", ".join(cc),
        subject,
        body,
        db.now(),
        reply_to,
    )
    return message_id


def _new_thread(db: Db, box: dict, subject: str) -> str:
    thread_id = db.new_id("TH")
    db.execute(
        "INSERT INTO threads (thread_id, mailbox_id, subject) VALUES (?, ?, ?)",
        thread_id,
        box["mailbox_id"],
        subject,
    )
    return thread_id


@tool
def search_messages(
    db: Db,
    query: str = "",
    folder: str = "",
    label: str = "",
    sender: str = "",
    unread_only: bool = False,
    limit: int = 20,
) -> dict:
    """Search the user's messages, newest first. Without a folder, trash and spam are left out.

    Args:
        query: Text to find in the subject or body.
        folder: inbox, sent, archive, trash or spam; empty for all but trash and spam.
        label: Only messages with this label, e.g. "Finance".
        sender: Part of the sender's name or address, e.g. "rachel".
        unread_only: Only unread messages.
        limit: Maximum number of results (1 to 100).
    """
    box = _mailbox(db)
    if not 1 <= limit <= 100:
        raise ToolError("limit must be between 1 and 100")
    sql = f"SELECT {SUMMARY_COLUMNS} FROM messages m WHERE m.mailbox_id = ?"
    params: list = [box["mailbox_id"]]
    if folder:
        if folder not in FOLDERS:
            raise ToolError(f"unknown folder {folder!r}; use one of {', '.join(FOLDERS)}")
        sql += " AND m.folder = ?"
        params.append(folder)
    else:
        sql += " AND m.folder NOT IN ('trash', 'spam')"
    if query.strip():
        sql += " AND (m.subject LIKE ? OR m.body LIKE ?)"
        params += [f"%{query.strip()}%"] * 2
    if sender.strip():
        sql += " AND (m.from_name LIKE ? OR m.from_addr LIKE ?)"
        params += [f"%{sender.strip()}%"] * 2
    if unread_only:
        sql += " AND m.is_read = 0"
    if label.strip():
        lab = _label(db, label)
        sql += " AND EXISTS (SELECT 1 FROM message_labels ml WHERE ml.message_id = m.message_id AND ml.label_id = ?)"
        params.append(lab["label_id"])
    rows = db.all(sql + " ORDER BY m.sent_at DESC, m.message_id DESC LIMIT ?", *params, limit)
    labels = _labels_by_message(db, [m["message_id"] for m in rows])
    return {"messages": [_summary(db, m, labels[m["message_id"]]) for m in rows], "count": len(rows)}


@tool
def get_message(db: Db, message_id: str) -> dict:
    """Read one message in full.

    Args:
        message_id: The message, e.g. "MSG-1002".
    """
    m = _own_message(db, message_id)
    out = _summary(db, m)
    out.update(
        to=_split(m["to_addrs"]), cc=_split(m["cc_addrs"]), body=m["body"], in_reply_to=m["in_reply_to"]
    )
    return out


@tool
def get_thread(db: Db, thread_id: str) -> dict:
    """Read a whole conversation, oldest message first.

    Args:
        thread_id: The thread, e.g. "TH-305".
    """
    box = _mailbox(db)
    th = db.one("SELECT * FROM threads WHERE thread_id = ? AND mailbox_id = ?", thread_id, box["mailbox_id"])
    if th is None:
        raise ToolError(f"no thread {thread_id} in your mailbox")
    msgs = db.all("SELECT * FROM messages WHERE thread_id = ? ORDER BY sent_at, message_id", thread_id)
    out = []
    for m in msgs:
        s = _summary(db, m)
        s.update(to=_split(m["to_addrs"]), cc=_split(m["cc_addrs"]), body=m["body"])
        out.append(s)
    return {"thread_id": thread_id, "subject": th["subject"], "messages": out}


@tool
def list_labels(db: Db) -> dict:
    """List the user's labels with how many messages carry each."""
    box = _mailbox(db)
    rows = db.all(
        "SELECT l.label_id, l.name, l.color, COUNT(ml.message_id) AS messages FROM labels l "
        "LEFT JOIN message_labels ml ON ml.label_id = l.label_id WHERE l.mailbox_id = ? GROUP BY l.label_id ORDER BY l.name",
        box["mailbox_id"],
    )
    return {"labels": rows, "count": len(rows)}


@tool
def search_contacts(db: Db, query: str) -> dict:
    """Find the user's contacts by name, email or company.

    Args:
        query: Part of a name, email or company, e.g. "whitaker".
    """
    box = _mailbox(db)
    if not query.strip():
        raise ToolError("query must not be empty")
    like = f"%{query.strip()}%"
    rows = db.all(
        "SELECT name, email, company, is_favorite FROM contacts WHERE mailbox_id = ? AND (name LIKE ? OR email LIKE ? OR company LIKE ?) ORDER BY name",
        box["mailbox_id"],
        like,
        like,
        like,
    )
    for r in rows:
        r["is_favorite"] = bool(r["is_favorite"])
    return {"contacts": rows, "count": len(rows)}


@tool(writes=True)
def send_message(db: Db, to: list[str], subject: str, body: str, cc: list[str] | None = None) -> dict:
    """Send a new email from the user's address (starts a new thread).

    Args:
        to: Recipient addresses.
        subject: Subject line (not empty).
        body: Message text.
        cc: Addresses to copy.
    """
    box = _mailbox(db)
    to_list = _addresses(to, "to")
    cc_list = [a for a in _addresses(cc, "cc") if a not in to_list]
    _check_recipients(to_list, cc_list)
    if not subject.strip():
        raise ToolError("subject must not be empty")
    thread_id = _new_thread(db, box, subject.strip())
    message_id = _store_sent(db, box, thread_id, to_list, cc_list, subject.strip(), body, None)
    return {"message_id": message_id, "thread_id": thread_id, "to": to_list, "cc": cc_list, "folder": "sent"}


@tool(writes=True)
def reply_to_message(db: Db, message_id: str, body: str, reply_all: bool = False) -> dict:
    """Reply to a message in the same thread; reply_all also copies the other recipients.

    Args:
        message_id: The message to answer, e.g. "MSG-1002".
        body: Reply text.
        reply_all: Copy everyone else who was on the message.
    """
    box = _mailbox(db)
    orig = _own_message(db, message_id)
    if orig["folder"] == "spam":
        raise ToolError(f"{message_id} is in spam; replying to spam is not allowed")
    if not body.strip():
        raise ToolError("body must not be empty")
    me = box["address"].lower()
    if orig["from_addr"].lower() == me:
        to_list = [a.lower() for a in _split(orig["to_addrs"])]
    else:
        to_list = [orig["from_addr"].lower()]
    cc_list: list[str] = []
    if reply_all:
        for a in _split(orig["to_addrs"]) + _split(orig["cc_addrs"]):
            a = a.lower()
            if a != me and a not in to_list and a not in cc_list:
                cc_list.append(a)
    _check_recipients(to_list, cc_list)
    subject = orig["subject"] if orig["subject"].lower().startswith("re:") else f"Re: {orig['subject']}"
    new_id = _store_sent(db, box, orig["thread_id"], to_list, cc_list, subject, body, message_id)
    db.execute("UPDATE messages SET is_read = 1 WHERE message_id = ?", message_id)
    return {
        "message_id": new_id,
        "thread_id": orig["thread_id"],
        "to": to_list,
        "cc": cc_list,
        "subject": subject,
    }


@tool(writes=True)
def save_draft(
    db: Db,
    subject: str = "",
    body: str = "",
    to: list[str] | None = None,
    cc: list[str] | None = None,
    draft_id: str = "",
) -> dict:
    """Save a new draft, or overwrite an existing draft when draft_id is given.

    Args:
        subject: Subject line.
        body: Message text.
        to: Recipient addresses.
        cc: Addresses to copy.
        draft_id: The draft to overwrite, e.g. "DRF-302"; empty for a new draft.
    """
    box = _mailbox(db)
    to_list = _addresses(to, "to")
    cc_list = _addresses(cc, "cc")
    if len(to_list) + len(cc_list) > MAX_RECIPIENTS:
        raise ToolError(f"at most {MAX_RECIPIENTS} recipients per message")
    if draft_id:
        if (
            db.one("SELECT 1 FROM drafts WHERE draft_id = ? AND mailbox_id = ?", draft_id, box["mailbox_id"])
            is None
        ):
            raise ToolError(f"no draft {draft_id} in your mailbox")
        db.execute(
            "UPDATE drafts SET to_addrs = ?, cc_addrs = ?, subject = ?, body = ?, updated_at = ? WHERE draft_id = ?",
            ", ".join(to_list),
            ", ".join(cc_list),
            subject,
            body,
            db.now(),
            draft_id,
        )
    else:
        if not (subject.strip() or body.strip() or to_list):
            raise ToolError("an empty draft is not saved")
        draft_id = db.new_id("DRF")
        db.execute(
            "INSERT INTO drafts (draft_id, mailbox_id, to_addrs, cc_addrs, subject, body, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            draft_id,
            box["mailbox_id"],
            ", ".join(to_list),
            ", ".join(cc_list),
            subject,
            body,
            db.now(),
        )
    return {"draft_id": draft_id, "to": to_list, "cc": cc_list, "subject": subject}


@tool
def list_drafts(db: Db) -> dict:
    """List the user's drafts, most recently edited first."""
    box = _mailbox(db)
    rows = db.all(
        "SELECT draft_id, to_addrs, cc_addrs, subject, body, updated_at FROM drafts WHERE mailbox_id = ? ORDER BY updated_at DESC",
        box["mailbox_id"],
    )
    out = [
        {
            "draft_id": r["draft_id"],
            "to": _split(r["to_addrs"]),
            "cc": _split(r["cc_addrs"]),
            "subject": r["subject"],
            "body": r["body"],
            "updated_at": r["updated_at"],
        }
        for r in rows
    ]
    return {"drafts": out, "count": len(out)}


@tool(writes=True)
def send_draft(db: Db, draft_id: str) -> dict:
    """Send a saved draft as it is; the draft is removed.

    Args:
        draft_id: The draft, e.g. "DRF-301".
    """
    box = _mailbox(db)
    d = db.one("SELECT * FROM drafts WHERE draft_id = ? AND mailbox_id = ?", draft_id, box["mailbox_id"])
    if d is None:
        raise ToolError(f"no draft {draft_id} in your mailbox")
    to_list, cc_list = _split(d["to_addrs"]), _split(d["cc_addrs"])
    _check_recipients(to_list, cc_list)
    if not d["subject"].strip():
        raise ToolError(f"draft {draft_id} has no subject; save one first")
    thread_id = d["thread_id"] or _new_thread(db, box, d["subject"])
    message_id = _store_sent(db, box, thread_id, to_list, cc_list, d["subject"], d["body"], d["in_reply_to"])
    db.execute("DELETE FROM drafts WHERE draft_id = ?", draft_id)
    return {"message_id": message_id, "thread_id": thread_id, "to": to_list, "folder": "sent"}


@tool(writes=True)
def create_label(db: Db, name: str, color: str = "gray") -> dict:
    """Create a new label.

    Args:
        name: Label name, 1 to 30 characters.
        color: Display color, e.g. "red".
    """
    box = _mailbox(db)
    name = name.strip()
    if not 1 <= len(name) <= 30:
        raise ToolError("a label name has 1 to 30 characters")
    if db.one(
        "SELECT 1 FROM labels WHERE mailbox_id = ? AND lower(name) = lower(?)", box["mailbox_id"], name
    ):
        raise ToolError(f"a label named {name!r} already exists")
    label_id = db.new_id("LBL")
    db.execute(
        "INSERT INTO labels (label_id, mailbox_id, name, color) VALUES (?, ?, ?, ?)",
        label_id,
        box["mailbox_id"],
        name,
        color,
    )
    return {"label_id": label_id, "name": name, "color": color}


@tool(writes=True)
def apply_label(db: Db, message_ids: list[str], label: str) -> dict:
    """Put an existing label on messages.

    Args:
        message_ids: The messages, e.g. ["MSG-1001"].
        label: The label name, e.g. "Finance".
    """
    lab = _label(db, label)
    msgs = _own_messages(db, message_ids)
    added = 0
    for m in msgs:
        added += db.execute(
            "INSERT OR IGNORE INTO message_labels (message_id, label_id) VALUES (?, ?)",
            m["message_id"],
            lab["label_id"],
        )
    return {"label": lab["name"], "labelled": [m["message_id"] for m in msgs], "newly_labelled": added}


@tool(writes=True)
def remove_label(db: Db, message_ids: list[str], label: str) -> dict:
    """Take a label off messages.

    Args:
        message_ids: The messages, e.g. ["MSG-1130"].
        label: The label name, e.g. "Finance".
    """
    lab = _label(db, label)
    msgs = _own_messages(db, message_ids)
    removed = 0
    for m in msgs:
        removed += db.execute(
            "DELETE FROM message_labels WHERE message_id = ? AND label_id = ?",
            m["message_id"],
            lab["label_id"],
        )
    if not removed:
        raise ToolError(f"none of these messages has the label {lab['name']!r}")
    return {"label": lab["name"], "removed_from": removed}


@tool(writes=True)
def archive_messages(db: Db, message_ids: list[str]) -> dict:
    """Move inbox messages to the archive.

    Args:
        message_ids: The messages, e.g. ["MSG-1101", "MSG-1104"].
    """
    msgs = _own_messages(db, message_ids)
    outside = [m["message_id"] for m in msgs if m["folder"] != "inbox"]
    if outside:
        raise ToolError(f"not in the inbox: {', '.join(outside)}")
    for m in msgs:
        db.execute("UPDATE messages SET folder = 'archive' WHERE message_id = ?", m["message_id"])
    return {"archived": [m["message_id"] for m in msgs]}


@tool(writes=True)
def mark_messages(
    db: Db, message_ids: list[str], is_read: bool | None = None, is_starred: bool | None = None
) -> dict:
    """Mark messages read/unread and/or starred/unstarred.

    Args:
        message_ids: The messages, e.g. ["MSG-1009"].
        is_read: true for read, false for unread; omit to leave as is.
        is_starred: true to star, false to unstar; omit to leave as is.
    """
    if is_read is None and is_starred is None:
        raise ToolError("give is_read and/or is_starred")
    msgs = _own_messages(db, message_ids)
    for m in msgs:
        if is_read is not None:
            db.execute("UPDATE messages SET is_read = ? WHERE message_id = ?", int(is_read), m["message_id"])
        if is_starred is not None:
            db.execute(
                "UPDATE messages SET is_starred = ? WHERE message_id = ?", int(is_starred), m["message_id"]
            )
    return {"updated": [m["message_id"] for m in msgs], "is_read": is_read, "is_starred": is_starred}


@tool(writes=True)
def move_to_trash(db: Db, message_ids: list[str]) -> dict:
    """Move messages to the trash (they can still be found with folder="trash").

    Args:
        message_ids: The messages, e.g. ["MSG-1137"].
    """
    msgs = _own_messages(db, message_ids)
    already = [m["message_id"] for m in msgs if m["folder"] == "trash"]
    if already:
        raise ToolError(f"already in the trash: {', '.join(already)}")
    for m in msgs:
        db.execute("UPDATE messages SET folder = 'trash' WHERE message_id = ?", m["message_id"])
    return {"trashed": [m["message_id"] for m in msgs]}
