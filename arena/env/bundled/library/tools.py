"""Tools of the Metro Public Library member account."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Literal

from arena.env import Db, ToolError, tool

LOAN_DAYS = 21
MAX_RENEWALS = 2
FINE_BLOCK = 10.0
MAX_HOLDS = 5
LOAN_LIMITS = {"standard": 5, "senior": 5, "student": 8, "staff": 15}


def _member(db: Db) -> dict:
    member = db.one("SELECT * FROM users WHERE id = ?", db.user_id)
    if member is None:
        raise ToolError("no signed-in member")
    return member


def _owed(db: Db) -> float:
    row = db.one(
        "SELECT coalesce(sum(amount), 0) AS owed FROM fines WHERE user_id = ? AND status = 'unpaid'",
        db.user_id,
    )
    return round(row["owed"], 2) if row else 0.0


def _due(db: Db) -> str:
    return (date.fromisoformat(db.today()) + timedelta(days=LOAN_DAYS)).isoformat()


def _active_loans(db: Db) -> list[dict]:
    return db.all(
        "SELECT l.loan_id, l.copy_id, b.book_id, b.title, b.author, l.borrowed_on, l.due_on, l.renewals, "
        "l.due_on < ? AS overdue FROM loans l JOIN copies c ON c.copy_id = l.copy_id "
        "JOIN books b ON b.book_id = c.book_id WHERE l.user_id = ? AND l.returned_on IS NULL ORDER BY l.due_on",
        db.today(),
        db.user_id,
    )


@tool
def search_catalog(
    db: Db, query: str = "", author: str | None = None, genre: str | None = None
) -> list[dict]:
    """Search books by title words, author or genre; shows how many copies are available at each branch.

    Args:
        query: Words from the title, e.g. "night circus".
        author: Part of the author's name, e.g. "Ishiguro".
        genre: A genre, e.g. "Fantasy".
    """
    sql = "SELECT book_id, title, author, year, genre FROM books WHERE 1 = 1"
    params: list = []
    # SQLite's LIKE ignores ASCII case already; lower() on each row only cost time.
    for word in query.lower().split():
        sql += " AND title LIKE ?"
        params.append(f"%{word}%")
    if author:
        sql += " AND author LIKE ?"
        params.append(f"%{author.lower()}%")
    if genre:
        sql += " AND lower(genre) = lower(?)"
        params.append(genre)
    books = db.all(sql + " ORDER BY title", *params)
    if not books:
        return books
    # Availability and holds of every found book in two queries, not two per book.
    ids = [b["book_id"] for b in books]
    marks = ", ".join("?" * len(ids))
    available: dict[str, dict[str, int]] = {i: {} for i in ids}
    for r in db.all(
        "SELECT c.book_id, br.name AS branch, count(*) AS available FROM copies c "
        "JOIN branches br ON br.branch_id = c.branch_id "
        f"WHERE c.book_id IN ({marks}) AND c.status = 'available' GROUP BY c.book_id, br.name ORDER BY br.name",
        *ids,
    ):
        available[r["book_id"]][r["branch"]] = r["available"]
    holds = {
        r["book_id"]: r["n"]
        for r in db.all(
            f"SELECT book_id, count(*) AS n FROM holds WHERE book_id IN ({marks}) AND status = 'waiting' "
            "GROUP BY book_id",
            *ids,
        )
    }
    for book in books:
        book["available_at"] = available[book["book_id"]]
        book["waiting_holds"] = holds.get(book["book_id"], 0)
    return books


@tool
def get_book(db: Db, book_id: str) -> dict:
    """A book's details and every copy with its branch, shelf, status and due date if on loan.

    Args:
        book_id: The book, e.g. "B-1007".
    """
    book = db.one("SELECT * FROM books WHERE book_id = ?", book_id)
    if book is None:
        raise ToolError(f"no book {book_id}")
    book["copies"] = db.all(
        "SELECT c.copy_id, c.branch_id, br.name AS branch, c.shelf, c.status, "
        "(SELECT due_on FROM loans l WHERE l.copy_id = c.copy_id AND l.returned_on IS NULL) AS due_on "
        "FROM copies c JOIN branches br ON br.branch_id = c.branch_id WHERE c.book_id = ? ORDER BY c.copy_id",
        book_id,
    )
    book["waiting_holds"] = db.one(
        "SELECT count(*) AS n FROM holds WHERE book_id = ? AND status = 'waiting'", book_id
    )["n"]
    return book


@tool
def list_branches(db: Db) -> list[dict]:
    """The library's branches with address and opening hours."""
    return db.all("SELECT branch_id, name, address, hours FROM branches ORDER BY name")


@tool
def get_account(db: Db) -> dict:
    """The member's account: membership, loan limit, current loans (due dates, renewals), holds and amount owed."""
    member = _member(db)
    loans = _active_loans(db)
    for loan in loans:
        loan["overdue"] = bool(loan["overdue"])
    holds = db.all(
        "SELECT h.hold_id, h.book_id, b.title, h.pickup_branch_id, br.name AS pickup_branch, h.status, h.copy_id, "
        "h.ready_until, h.placed_at FROM holds h JOIN books b ON b.book_id = h.book_id "
        "JOIN branches br ON br.branch_id = h.pickup_branch_id WHERE h.user_id = ? AND h.status IN ('waiting', 'ready') "
        "ORDER BY h.placed_at",
        db.user_id,
    )
    return {
        "name": member["name"],
        "card_number": member["card_number"],
        "membership": member["membership"],
        "status": member["status"],
        "home_branch_id": member["home_branch_id"],
        "loan_limit": LOAN_LIMITS[member["membership"]],
        "loans": loans,
        "holds": holds,
        "amount_owed": _owed(db),
    }


@tool(writes=True)
def borrow_copy(db: Db, copy_id: str) -> dict:
    """Check out a copy by its barcode (self-checkout); due in 21 days.

    Args:
        copy_id: The copy's barcode, e.g. "C-100801".
    """
    member = _member(db)
    if member["status"] != "active":
        raise ToolError("your membership is suspended; please contact the library")
    copy = db.one(
        "SELECT c.*, b.title FROM copies c JOIN books b ON b.book_id = c.book_id WHERE c.copy_id = ?", copy_id
    )
    if copy is None:
        raise ToolError(f"no copy {copy_id}")
    hold = None
    if copy["status"] == "on_hold_shelf":
        hold = db.one(
            "SELECT hold_id FROM holds WHERE copy_id = ? AND user_id = ? AND status = 'ready'",
            copy_id,
            db.user_id,
        )
        if hold is None:
            raise ToolError(f"copy {copy_id} is on the hold shelf for another member")
    elif copy["status"] != "available":
        raise ToolError(f"copy {copy_id} of {copy['title']} is {copy['status'].replace('_', ' ')}")
    limit = LOAN_LIMITS[member["membership"]]
    if len(_active_loans(db)) >= limit:
        raise ToolError(
            f"you already have {limit} items on loan, the limit for {member['membership']} members"
        )
    owed = _owed(db)
    if owed >= FINE_BLOCK:
        raise ToolError(f"you owe ${owed:.2f}; pay your fines below ${FINE_BLOCK:.2f} to borrow")
    loan_id = db.new_id("LN")
    due = _due(db)
    db.execute(
        "INSERT INTO loans VALUES (?, ?, ?, ?, ?, NULL, 0)", loan_id, copy_id, db.user_id, db.today(), due
    )
    db.execute("UPDATE copies SET status = 'on_loan' WHERE copy_id = ?", copy_id)
    if hold:
        db.execute("UPDATE holds SET status = 'fulfilled' WHERE hold_id = ?", hold["hold_id"])
    return {
        "loan_id": loan_id,
        "copy_id": copy_id,
        "title": copy["title"],
        "due_on": due,
        "fulfilled_hold": hold["hold_id"] if hold else None,
    }


@tool(writes=True)
def renew_loan(db: Db, loan_id: str) -> dict:
    """Renew one of the member's current loans: the new due date is 21 days from today.

    Args:
        loan_id: The loan, e.g. "LN-5001".
    """
    loan = db.one(
        "SELECT l.*, c.book_id, b.title FROM loans l JOIN copies c ON c.copy_id = l.copy_id "
        "JOIN books b ON b.book_id = c.book_id WHERE l.loan_id = ? AND l.user_id = ?",
        loan_id,
        db.user_id,
    )
    if loan is None:
        raise ToolError(f"no loan {loan_id} on your account")
    if loan["returned_on"] is not None:
        raise ToolError(f"{loan['title']} was returned on {loan['returned_on']}")
    if loan["renewals"] >= MAX_RENEWALS:
        raise ToolError(f"{loan['title']} has already been renewed {MAX_RENEWALS} times; please return it")
    waiting = db.one(
        "SELECT count(*) AS n FROM holds WHERE book_id = ? AND status = 'waiting' AND user_id <> ?",
        loan["book_id"],
        db.user_id,
    )
    if waiting and waiting["n"]:
        raise ToolError(f"{loan['title']} cannot be renewed: another member is waiting for it")
    owed = _owed(db)
    if owed >= FINE_BLOCK:
        raise ToolError(f"you owe ${owed:.2f}; pay your fines below ${FINE_BLOCK:.2f} to renew")
    due = _due(db)
    if due <= loan["due_on"]:
        raise ToolError(
            f"{loan['title']} is already due on {loan['due_on']}, later than a renewal would give"
        )
    db.execute("UPDATE loans SET due_on = ?, renewals = renewals + 1 WHERE loan_id = ?", due, loan_id)
    return {
        "loan_id": loan_id,
        "title": loan["title"],
        "old_due_on": loan["due_on"],
        "due_on": due,
        "renewals": loan["renewals"] + 1,
        "renewals_left": MAX_RENEWALS - loan["renewals"] - 1,
    }


@tool(writes=True)
def place_hold(db: Db, book_id: str, pickup_branch_id: str) -> dict:
    """Place a hold on a title to be picked up at a branch when a copy comes free.

    Args:
        book_id: The book, e.g. "B-1007".
        pickup_branch_id: Where to pick it up, e.g. "BR-RIV".
    """
    member = _member(db)
    if member["status"] != "active":
        raise ToolError("your membership is suspended; please contact the library")
    book = db.one("SELECT book_id, title FROM books WHERE book_id = ?", book_id)
    if book is None:
        raise ToolError(f"no book {book_id}")
    branch = db.one("SELECT name FROM branches WHERE branch_id = ?", pickup_branch_id)
    if branch is None:
        raise ToolError(f"no branch {pickup_branch_id}")
    if any(loan["book_id"] == book_id for loan in _active_loans(db)):
        raise ToolError(f"you already have {book['title']} on loan")
    active = db.all(
        "SELECT book_id FROM holds WHERE user_id = ? AND status IN ('waiting', 'ready')", db.user_id
    )
    if any(h["book_id"] == book_id for h in active):
        raise ToolError(f"you already have a hold on {book['title']}")
    if len(active) >= MAX_HOLDS:
        raise ToolError(f"you already have {MAX_HOLDS} active holds")
    shelf = db.one(
        "SELECT copy_id FROM copies WHERE book_id = ? AND branch_id = ? AND status = 'available'",
        book_id,
        pickup_branch_id,
    )
    if shelf:
        raise ToolError(
            f"{book['title']} is on the shelf at {branch['name']} (copy {shelf['copy_id']}); borrow it there"
        )
    hold_id = db.new_id("HD")
    db.execute(
        "INSERT INTO holds VALUES (?, ?, ?, ?, ?, 'waiting', NULL, NULL)",
        hold_id,
        book_id,
        db.user_id,
        pickup_branch_id,
        db.now(),
    )
    position = db.one("SELECT count(*) AS n FROM holds WHERE book_id = ? AND status = 'waiting'", book_id)[
        "n"
    ]
    return {
        "hold_id": hold_id,
        "title": book["title"],
        "pickup_branch": branch["name"],
        "status": "waiting",
        "queue_position": position,
    }


@tool(writes=True)
def cancel_hold(db: Db, hold_id: str) -> dict:
    """Cancel one of the member's waiting or ready holds (a ready copy goes back on the shelf).

    Args:
        hold_id: The hold, e.g. "HD-702".
    """
    hold = db.one("SELECT * FROM holds WHERE hold_id = ? AND user_id = ?", hold_id, db.user_id)
    if hold is None:
        raise ToolError(f"no hold {hold_id} on your account")
    if hold["status"] not in ("waiting", "ready"):
        raise ToolError(f"hold {hold_id} is already {hold['status']}")
    db.execute("UPDATE holds SET status = 'cancelled' WHERE hold_id = ?", hold_id)
    if hold["copy_id"] and hold["status"] == "ready":
        db.execute("UPDATE copies SET status = 'available' WHERE copy_id = ?", hold["copy_id"])
    return {"hold_id": hold_id, "status": "cancelled"}


@tool(writes=True)
def change_hold_pickup(db: Db, hold_id: str, pickup_branch_id: str) -> dict:
    """Change the pickup branch of a waiting hold.

    Args:
        hold_id: The hold, e.g. "HD-702".
        pickup_branch_id: The new pickup branch, e.g. "BR-NOR".
    """
    hold = db.one("SELECT * FROM holds WHERE hold_id = ? AND user_id = ?", hold_id, db.user_id)
    if hold is None:
        raise ToolError(f"no hold {hold_id} on your account")
    if hold["status"] != "waiting":
        raise ToolError(f"hold {hold_id} is {hold['status']}; only waiting holds can change branch")
    branch = db.one("SELECT name FROM branches WHERE branch_id = ?", pickup_branch_id)
    if branch is None:
        raise ToolError(f"no branch {pickup_branch_id}")
    if pickup_branch_id == hold["pickup_branch_id"]:
        raise ToolError(f"hold {hold_id} is already for pickup at {branch['name']}")
    db.execute("UPDATE holds SET pickup_branch_id = ? WHERE hold_id = ?", pickup_branch_id, hold_id)
    return {"hold_id": hold_id, "pickup_branch_id": pickup_branch_id, "pickup_branch": branch["name"]}


@tool
def list_fines(db: Db, status: Literal["unpaid", "paid", "waived"] | None = None) -> dict:
    """The member's fines, newest first, and the total still owed.

    Args:
        status: Only fines with this status.
    """
    sql = "SELECT fine_id, amount, reason, status, created_at, payment_id FROM fines WHERE user_id = ?"
    params: list = [db.user_id]
    if status:
        sql += " AND status = ?"
        params.append(status)
    return {"fines": db.all(sql + " ORDER BY created_at DESC", *params), "amount_owed": _owed(db)}


@tool(writes=True)
def pay_fines(db: Db, fine_ids: list[str], method: Literal["card", "paypal"] = "card") -> dict:
    """Pay one or more of the member's unpaid fines in full, in a single payment.

    Args:
        fine_ids: The fines to pay, e.g. ["FN-901", "FN-902"].
        method: card or paypal.
    """
    if not fine_ids:
        raise ToolError("give at least one fine to pay")
    ids = list(dict.fromkeys(fine_ids))
    total = 0.0
    for fine_id in ids:
        fine = db.one(
            "SELECT amount, status FROM fines WHERE fine_id = ? AND user_id = ?", fine_id, db.user_id
        )
        if fine is None:
            raise ToolError(f"no fine {fine_id} on your account")
        if fine["status"] != "unpaid":
            raise ToolError(f"fine {fine_id} is already {fine['status']}")
        total += fine["amount"]
    total = round(total, 2)
    payment_id = db.new_id("PAY")
    db.execute("INSERT INTO payments VALUES (?, ?, ?, ?, ?)", payment_id, db.user_id, total, method, db.now())
    for fine_id in ids:
        db.execute("UPDATE fines SET status = 'paid', payment_id = ? WHERE fine_id = ?", payment_id, fine_id)
    return {"payment_id": payment_id, "paid": ids, "amount": total, "amount_owed": _owed(db)}
