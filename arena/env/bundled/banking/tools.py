"""Tools of the banking environment: accounts, transactions, payees, transfers and cards."""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Literal

from arena.env import Db, ToolError, tool

MAX_CARD_LIMIT = {"debit": 5000.0, "credit": 10000.0}


def _account(db: Db, account_id: str) -> dict:
    acc = db.one("SELECT * FROM accounts WHERE account_id = ? AND user_id = ?", account_id, db.user_id)
    if acc is None:
        raise ToolError(f"no account {account_id} of yours")
    return acc


def _card(db: Db, card_id: str) -> dict:
    card = db.one("SELECT * FROM cards WHERE card_id = ? AND user_id = ?", card_id, db.user_id)
    if card is None:
        raise ToolError(f"no card {card_id} of yours")
    return card


def _date(value: str, what: str) -> str:
    try:
        return date.fromisoformat(value).isoformat()
    except ValueError:
        raise ToolError(f"{what} must be a date like 2025-06-15, got {value!r}") from None


def _money(amount: float) -> float:
    if amount <= 0:
        raise ToolError("amount must be positive")
    if round(amount, 2) != round(amount, 6):
        raise ToolError("amount can have at most 2 decimals")
    return round(amount, 2)


def _card_view(card: dict) -> dict:
    return {
        "card_id": card["card_id"],
        "kind": card["kind"],
        "last4": card["last4"],
        "account_id": card["account_id"],
        "status": card["status"],
        "expires": card["expires"],
        "daily_limit": card["daily_limit"],
        "online_payments": bool(card["online_payments"]),
    }


@tool
def list_accounts(db: Db) -> dict:
    """List the customer's accounts (balance < 0 on a credit card = amount owed) and payee transfer limits."""
    rows = db.all(
        "SELECT account_id, kind, nickname, last4, balance, overdraft_limit, credit_limit, status FROM accounts "
        "WHERE user_id = ? ORDER BY account_id",
        db.user_id,
    )
    limits = db.one("SELECT per_transfer_limit, daily_transfer_limit FROM users WHERE id = ?", db.user_id)
    return {"accounts": rows, "count": len(rows), "payee_transfer_limits": limits}


@tool
def get_transactions(
    db: Db,
    account_id: str,
    start_date: str = "",
    end_date: str = "",
    category: str = "",
    query: str = "",
    limit: int = 50,
) -> dict:
    """List an account's transactions, newest first, with their total.

    Args:
        account_id: The account, e.g. "ACC-1001".
        start_date: First day included, e.g. "2025-05-01"; empty for no bound.
        end_date: Last day included; empty for no bound.
        category: e.g. groceries, dining, rent, utilities, income, transfer, shopping, transport.
        query: Text to find in the description, e.g. "Safeway".
        limit: Maximum number of transactions listed (1 to 200); the total covers all matches.
    """
    _account(db, account_id)
    if not 1 <= limit <= 200:
        raise ToolError("limit must be between 1 and 200")
    sql = "FROM transactions WHERE account_id = ?"
    params: list = [account_id]
    if start_date:
        sql += " AND substr(posted_at, 1, 10) >= ?"
        params.append(_date(start_date, "start_date"))
    if end_date:
        sql += " AND substr(posted_at, 1, 10) <= ?"
        params.append(_date(end_date, "end_date"))
    if category.strip():
        sql += " AND lower(category) = lower(?)"
        params.append(category.strip())
    if query.strip():
        sql += " AND description LIKE ?"
        params.append(f"%{query.strip()}%")
    agg = db.one(f"SELECT COUNT(*) AS n, ROUND(COALESCE(SUM(amount), 0), 2) AS total {sql}", *params)
    rows = db.all(
        f"SELECT txn_id, posted_at, amount, description, category, status {sql} ORDER BY posted_at DESC, txn_id DESC LIMIT ?",
        *params,
        limit,
    )
    return {"account_id": account_id, "transactions": rows, "count": agg["n"], "total": agg["total"]}


@tool
def list_payees(db: Db, query: str = "") -> dict:
    """List the customer's saved payees.

    Args:
        query: Part of the payee's name; empty for all.
    """
    rows = db.all(
        "SELECT payee_id, name, bank, '****' || substr(account_number, -4) AS account, kind FROM payees "
        "WHERE user_id = ? AND name LIKE ? ORDER BY name",
        db.user_id,
        f"%{query.strip()}%",
    )
    return {"payees": rows, "count": len(rows)}


@tool(writes=True)
def add_payee(
    db: Db, name: str, bank: str, account_number: str, kind: Literal["person", "business"] = "person"
) -> dict:
    """Save a new payee so the customer can pay them.

    Args:
        name: The payee's name as on their account.
        bank: The payee's bank.
        account_number: 8 to 17 digits.
        kind: person or business.
    """
    number = account_number.replace(" ", "").replace("-", "")
    if not name.strip() or not bank.strip():
        raise ToolError("name and bank are required")
    if not re.fullmatch(r"\d{8,17}", number):
        raise ToolError("account_number must have 8 to 17 digits")
    if db.one("SELECT 1 FROM payees WHERE user_id = ? AND account_number = ?", db.user_id, number):
        raise ToolError("a payee with this account number already exists")
    payee_id = db.new_id("PAY")
    db.execute(
        "INSERT INTO payees (payee_id, user_id, name, bank, account_number, kind, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        payee_id,
        db.user_id,
        name.strip(),
        bank.strip(),
        number,
        kind,
        db.now(),
    )
    return {"payee_id": payee_id, "name": name.strip(), "bank": bank.strip(), "account": f"****{number[-4:]}"}


@tool(writes=True)
def transfer_funds(
    db: Db,
    from_account_id: str,
    amount: float,
    to_account_id: str = "",
    payee_id: str = "",
    memo: str = "",
    on_date: str = "",
) -> dict:
    """Move money to another of the customer's accounts or to a saved payee, now or on a future date.

    Give exactly one of to_account_id and payee_id.

    Args:
        from_account_id: The checking or savings account to take the money from.
        amount: Amount in dollars, e.g. 250.00.
        to_account_id: One of the customer's own accounts (a credit card account to pay it off).
        payee_id: A saved payee, e.g. "PAY-102".
        memo: A note for the statement.
        on_date: A future date like 2025-06-15 to schedule it; empty for now.
    """
    amount = _money(amount)
    if bool(to_account_id) == bool(payee_id):
        raise ToolError("give exactly one of to_account_id and payee_id")
    src = _account(db, from_account_id)
    if src["kind"] == "credit_card":
        raise ToolError("transfers cannot be made from a credit card account")
    if src["status"] != "active":
        raise ToolError(f"account {from_account_id} is {src['status']}")
    today = db.today()
    when = _date(on_date, "on_date") if on_date else today
    if when < today:
        raise ToolError("on_date is in the past")
    if when > (date.fromisoformat(today) + timedelta(days=365)).isoformat():
        raise ToolError("transfers can be scheduled at most one year ahead")
    dest = payee = None
    if to_account_id:
        dest = _account(db, to_account_id)
        if to_account_id == from_account_id:
            raise ToolError("from and to accounts are the same")
        if dest["status"] != "active":
            raise ToolError(f"account {to_account_id} is {dest['status']}")
        if dest["kind"] == "credit_card" and amount > -dest["balance"] + 1e-9:
            raise ToolError(f"the card balance owed is {-dest['balance']:.2f}; you cannot pay more than that")
    else:
        payee = db.one("SELECT * FROM payees WHERE payee_id = ? AND user_id = ?", payee_id, db.user_id)
        if payee is None:
            raise ToolError(f"no saved payee {payee_id}")
        user = db.one("SELECT per_transfer_limit, daily_transfer_limit FROM users WHERE id = ?", db.user_id)
        if amount > user["per_transfer_limit"]:
            raise ToolError(
                f"payments to payees are limited to {user['per_transfer_limit']:.2f} per transfer"
            )
        same_day = db.one(
            "SELECT COALESCE(SUM(amount), 0) AS s FROM transfers WHERE user_id = ? AND payee_id IS NOT NULL "
            "AND status != 'cancelled' AND scheduled_for = ?",
            db.user_id,
            when,
        )["s"]
        if same_day + amount > user["daily_transfer_limit"] + 1e-9:
            raise ToolError(
                f"daily payee limit {user['daily_transfer_limit']:.2f} exceeded: {same_day:.2f} already goes out on {when}"
            )
    if when == today and src["balance"] + src["overdraft_limit"] < amount - 1e-9:
        raise ToolError(
            f"insufficient funds in {from_account_id}: available {src['balance'] + src['overdraft_limit']:.2f}, needed {amount:.2f}"
        )
    transfer_id = db.new_id("TRF")
    status = "completed" if when == today else "scheduled"
    db.execute(
        "INSERT INTO transfers (transfer_id, user_id, from_account_id, to_account_id, payee_id, amount, memo, status, "
        "scheduled_for, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        transfer_id,
        db.user_id,
        from_account_id,
        to_account_id or None,
        payee_id or None,
        amount,
        memo,
        status,
        when,
        db.now(),
    )
    target = dest["nickname"] if dest else payee["name"]
    if status == "completed":
        db.execute(
            "UPDATE accounts SET balance = ROUND(balance - ?, 2) WHERE account_id = ?",
            amount,
            from_account_id,
        )
        db.execute(
            "INSERT INTO transactions (txn_id, account_id, posted_at, amount, description, category, status) VALUES (?, ?, ?, ?, ?, 'transfer', 'posted')",
            db.new_id("TXN"),
            from_account_id,
            db.now(),
            -amount,
            f"Transfer to {target}" + (f" - {memo}" if memo else ""),
        )
        if dest:
            db.execute(
                "UPDATE accounts SET balance = ROUND(balance + ?, 2) WHERE account_id = ?",
                amount,
                to_account_id,
            )
            db.execute(
                "INSERT INTO transactions (txn_id, account_id, posted_at, amount, description, category, status) VALUES (?, ?, ?, ?, ?, 'transfer', 'posted')",
                db.new_id("TXN"),
                to_account_id,
                db.now(),
                amount,
                f"Transfer from {src['nickname']}" + (f" - {memo}" if memo else ""),
            )
    new_balance = db.one("SELECT balance FROM accounts WHERE account_id = ?", from_account_id)["balance"]
    return {
        "transfer_id": transfer_id,
        "status": status,
        "amount": amount,
        "to": target,
        "scheduled_for": when,
        "from_balance": new_balance,
    }


@tool
def list_transfers(db: Db, status: str = "") -> dict:
    """List the customer's transfers, latest date first.

    Args:
        status: completed, scheduled or cancelled; empty for all.
    """
    sql = (
        "SELECT t.transfer_id, t.from_account_id, t.to_account_id, t.payee_id, COALESCE(p.name, a.nickname) AS recipient, "
        "t.amount, t.memo, t.status, t.scheduled_for FROM transfers t LEFT JOIN payees p ON p.payee_id = t.payee_id "
        "LEFT JOIN accounts a ON a.account_id = t.to_account_id WHERE t.user_id = ?"
    )
    params: list = [db.user_id]
    if status:
        sql += " AND t.status = ?"
        params.append(status)
    rows = db.all(sql + " ORDER BY t.scheduled_for DESC, t.transfer_id DESC", *params)
    return {"transfers": rows, "count": len(rows)}


@tool(writes=True)
def cancel_transfer(db: Db, transfer_id: str) -> dict:
    """Cancel a scheduled transfer (completed transfers cannot be reversed).

    Args:
        transfer_id: The transfer, e.g. "TRF-3005".
    """
    t = db.one("SELECT * FROM transfers WHERE transfer_id = ? AND user_id = ?", transfer_id, db.user_id)
    if t is None:
        raise ToolError(f"no transfer {transfer_id} of yours")
    if t["status"] != "scheduled":
        raise ToolError(f"transfer {transfer_id} is {t['status']} and cannot be cancelled")
    db.execute("UPDATE transfers SET status = 'cancelled' WHERE transfer_id = ?", transfer_id)
    return {
        "transfer_id": transfer_id,
        "status": "cancelled",
        "amount": t["amount"],
        "scheduled_for": t["scheduled_for"],
    }


@tool
def list_cards(db: Db) -> dict:
    """List the customer's debit and credit cards."""
    rows = db.all("SELECT * FROM cards WHERE user_id = ? ORDER BY card_id", db.user_id)
    return {"cards": [_card_view(c) for c in rows], "count": len(rows)}


@tool(writes=True)
def freeze_card(db: Db, card_id: str) -> dict:
    """Temporarily block an active card; it can be unfrozen later.

    Args:
        card_id: The card, e.g. "CARD-11".
    """
    card = _card(db, card_id)
    if card["status"] != "active":
        raise ToolError(f"card {card_id} is {card['status']}, not active")
    db.execute("UPDATE cards SET status = 'frozen' WHERE card_id = ?", card_id)
    return {"card_id": card_id, "last4": card["last4"], "status": "frozen"}


@tool(writes=True)
def unfreeze_card(db: Db, card_id: str) -> dict:
    """Reactivate a frozen card (only if its account is active).

    Args:
        card_id: The card, e.g. "CARD-11".
    """
    card = _card(db, card_id)
    if card["status"] != "frozen":
        raise ToolError(f"card {card_id} is {card['status']}, not frozen")
    acc = _account(db, card["account_id"])
    if acc["status"] != "active":
        raise ToolError(f"the account of card {card_id} is {acc['status']}; the card must stay frozen")
    db.execute("UPDATE cards SET status = 'active' WHERE card_id = ?", card_id)
    return {"card_id": card_id, "last4": card["last4"], "status": "active"}


@tool(writes=True)
def set_card_limit(db: Db, card_id: str, daily_limit: float, online_payments: bool | None = None) -> dict:
    """Change a card's daily spending limit and optionally turn online payments on or off.

    Args:
        card_id: The card, e.g. "CARD-11".
        daily_limit: New daily limit in dollars (debit up to 5,000, credit up to 10,000).
        online_payments: true/false to allow or block online payments; omit to keep as is.
    """
    card = _card(db, card_id)
    if card["status"] == "cancelled":
        raise ToolError(f"card {card_id} is cancelled")
    cap = MAX_CARD_LIMIT[card["kind"]]
    if not 0 <= daily_limit <= cap:
        raise ToolError(f"a {card['kind']} card's daily limit must be between 0 and {cap:,.0f}")
    online = card["online_payments"] if online_payments is None else int(online_payments)
    db.execute(
        "UPDATE cards SET daily_limit = ?, online_payments = ? WHERE card_id = ?",
        round(daily_limit, 2),
        online,
        card_id,
    )
    return {"card_id": card_id, "daily_limit": round(daily_limit, 2), "online_payments": bool(online)}


@tool(writes=True)
def report_card_lost(db: Db, card_id: str) -> dict:
    """Report a card lost or stolen: it is cancelled for good and a replacement is issued.

    Args:
        card_id: The card, e.g. "CARD-11".
    """
    card = _card(db, card_id)
    if card["status"] == "cancelled":
        raise ToolError(f"card {card_id} is already cancelled")
    db.execute("UPDATE cards SET status = 'cancelled' WHERE card_id = ?", card_id)
    new_id = db.new_id("CARD")
    last4 = f"{(int(card['last4']) * 7 + 1234) % 10000:04d}"
    expires = f"{int(db.today()[:4]) + 4}-{db.today()[5:7]}"
    db.execute(
        "INSERT INTO cards (card_id, user_id, account_id, kind, last4, status, expires, daily_limit, online_payments) "
        "VALUES (?, ?, ?, ?, ?, 'active', ?, ?, ?)",
        new_id,
        db.user_id,
        card["account_id"],
        card["kind"],
        last4,
        expires,
        card["daily_limit"],
        card["online_payments"],
    )
    return {
        "cancelled_card_id": card_id,
        "replacement_card_id": new_id,
        "replacement_last4": last4,
        "expires": expires,
    }
