"""Tools of the Northwind Tracker issue tracker."""

from __future__ import annotations

from datetime import date
from typing import Literal

from arena.env import Db, ToolError, tool

Status = Literal["backlog", "todo", "in_progress", "in_review", "done", "closed"]
Priority = Literal["low", "medium", "high", "urgent"]

TRANSITIONS: dict[str, set[str]] = {
    "backlog": {"todo", "closed"},
    "todo": {"in_progress", "backlog", "closed"},
    "in_progress": {"in_review", "todo"},
    "in_review": {"done", "in_progress"},
    "done": {"closed", "todo"},
    "closed": {"todo"},
}
WIP_LIMIT = 3
POINTS = (1, 2, 3, 5, 8, 13)


def _role(db: Db, project_id: str) -> str | None:
    row = db.one(
        "SELECT role FROM project_members WHERE project_id = ? AND user_id = ?", project_id, db.user_id
    )
    return row["role"] if row else None


def _project(db: Db, project_id: str, *, write: bool = False) -> dict:
    project = db.one("SELECT * FROM projects WHERE project_id = ?", project_id.upper())
    role = _role(db, project_id.upper()) if project else None
    if project is None or role is None:
        raise ToolError(f"no project {project_id} that you belong to")
    if write and role == "viewer":
        raise ToolError(f"you are a viewer in {project['project_id']} and cannot change it")
    if write and project["archived"]:
        raise ToolError(f"project {project['project_id']} is archived and read-only")
    project["role"] = role
    return project


def _issue(db: Db, issue_id: str, *, write: bool = False) -> tuple[dict, dict]:
    issue = db.one("SELECT * FROM issues WHERE issue_id = ?", issue_id.upper())
    if issue is None or _role(db, issue["project_id"]) is None:
        raise ToolError(f"no issue {issue_id} in your projects")
    return issue, _project(db, issue["project_id"], write=write)


def _member_by_handle(db: Db, project_id: str, handle: str) -> dict:
    user = db.one("SELECT id, name, handle FROM users WHERE handle = ?", handle.strip().lstrip("@").lower())
    if user is None:
        raise ToolError(f"no user @{handle.lstrip('@')}")
    role = db.one(
        "SELECT role FROM project_members WHERE project_id = ? AND user_id = ?", project_id, user["id"]
    )
    if role is None or role["role"] == "viewer":
        raise ToolError(f"@{user['handle']} is not a member of {project_id} who can be assigned")
    return user


def _log(db: Db, issue_id: str, field: str, old: object, new: object) -> None:
    db.execute(
        "INSERT INTO issue_events (issue_id, actor_id, field, old_value, new_value, at) VALUES (?, ?, ?, ?, ?, ?)",
        issue_id,
        db.user_id,
        field,
        None if old is None else str(old),
        None if new is None else str(new),
        db.now(),
    )


def _handle(db: Db, user_id: int | None) -> str | None:
    if user_id is None:
        return None
    row = db.one("SELECT handle FROM users WHERE id = ?", user_id)
    return row["handle"] if row else None


def _labels(db: Db, issue_id: str) -> list[str]:
    rows = db.all(
        "SELECT l.name FROM issue_labels il JOIN labels l ON l.label_id = il.label_id WHERE il.issue_id = ? "
        "ORDER BY l.name",
        issue_id,
    )
    return [r["name"] for r in rows]


def _summary(db: Db, issue: dict) -> dict:
    return {
        "issue_id": issue["issue_id"],
        "title": issue["title"],
        "type": issue["type"],
        "status": issue["status"],
        "priority": issue["priority"],
        "assignee": _handle(db, issue["assignee_id"]),
        "sprint_id": issue["sprint_id"],
        "story_points": issue["story_points"],
        "labels": _labels(db, issue["issue_id"]),
    }


@tool
def list_projects(db: Db) -> list[dict]:
    """Projects the signed-in user belongs to, with their role and lead."""
    return db.all(
        "SELECT p.project_id, p.name, p.description, m.role, u.handle AS lead, p.archived = 1 AS archived "
        "FROM projects p JOIN project_members m ON m.project_id = p.project_id AND m.user_id = ? "
        "JOIN users u ON u.id = p.lead_id ORDER BY p.project_id",
        db.user_id,
    )


@tool
def list_members(db: Db, project_id: str) -> list[dict]:
    """Members of a project with handle, name, title and role.

    Args:
        project_id: The project key, e.g. "WEB".
    """
    project = _project(db, project_id)
    return db.all(
        "SELECT u.handle, u.name, u.title, m.role FROM project_members m JOIN users u ON u.id = m.user_id "
        "WHERE m.project_id = ? ORDER BY u.handle",
        project["project_id"],
    )


@tool
def list_sprints(db: Db, project_id: str) -> list[dict]:
    """Sprints of a project with dates, state and how many issues and points each holds.

    Args:
        project_id: The project key, e.g. "WEB".
    """
    project = _project(db, project_id)
    return db.all(
        "SELECT s.sprint_id, s.name, s.start_date, s.end_date, s.state, count(i.issue_id) AS issues, "
        "coalesce(sum(i.story_points), 0) AS points FROM sprints s LEFT JOIN issues i ON i.sprint_id = s.sprint_id "
        "WHERE s.project_id = ? GROUP BY s.sprint_id ORDER BY s.start_date",
        project["project_id"],
    )


@tool
def search_issues(
    db: Db,
    project_id: str | None = None,
    status: Status | None = None,
    assignee: str | None = None,
    label: str | None = None,
    text: str | None = None,
    sprint_id: str | None = None,
) -> list[dict]:
    """Search issues in the user's projects; every filter is optional and they combine.

    Args:
        project_id: Only this project, e.g. "WEB".
        status: Only issues in this status.
        assignee: A handle like "jkim", "me" for the signed-in user, or "unassigned".
        label: Only issues with this label, e.g. "accessibility".
        text: Words that must appear in the title or description.
        sprint_id: Only issues in this sprint, e.g. "SPR-WEB-14".
    """
    sql = "SELECT i.* FROM issues i JOIN project_members m ON m.project_id = i.project_id AND m.user_id = ? WHERE 1 = 1"
    params: list = [db.user_id]
    if project_id:
        sql += " AND i.project_id = ?"
        params.append(project_id.upper())
    if status:
        sql += " AND i.status = ?"
        params.append(status)
    if assignee:
        who = assignee.strip().lstrip("@").lower()
        if who == "unassigned":
            sql += " AND i.assignee_id IS NULL"
        elif who == "me":
            sql += " AND i.assignee_id = ?"
            params.append(db.user_id)
        else:
            sql += " AND i.assignee_id = (SELECT id FROM users WHERE handle = ?)"
            params.append(who)
    if label:
        sql += (
            " AND EXISTS (SELECT 1 FROM issue_labels il JOIN labels l ON l.label_id = il.label_id "
            "WHERE il.issue_id = i.issue_id AND lower(l.name) = lower(?))"
        )
        params.append(label)
    for word in (text or "").lower().split():
        sql += " AND (lower(i.title) LIKE ? OR lower(i.description) LIKE ?)"
        params += [f"%{word}%", f"%{word}%"]
    if sprint_id:
        sql += " AND i.sprint_id = ?"
        params.append(sprint_id)
    rows = db.all(sql + " ORDER BY i.project_id, i.created_at", *params)
    return [_summary(db, row) for row in rows]


@tool
def get_issue(db: Db, issue_id: str) -> dict:
    """An issue with description, people, labels, comments and change history.

    Args:
        issue_id: The issue key, e.g. "WEB-102".
    """
    issue, _ = _issue(db, issue_id)
    result = _summary(db, issue)
    result.update(
        project_id=issue["project_id"],
        description=issue["description"],
        reporter=_handle(db, issue["reporter_id"]),
        due_date=issue["due_date"],
        created_at=issue["created_at"],
        updated_at=issue["updated_at"],
    )
    result["comments"] = db.all(
        "SELECT c.comment_id, u.handle AS author, c.body, c.created_at FROM comments c "
        "JOIN users u ON u.id = c.author_id WHERE c.issue_id = ? ORDER BY c.created_at",
        issue["issue_id"],
    )
    result["history"] = db.all(
        "SELECT u.handle AS actor, e.field, e.old_value, e.new_value, e.at FROM issue_events e "
        "JOIN users u ON u.id = e.actor_id WHERE e.issue_id = ? ORDER BY e.event_id",
        issue["issue_id"],
    )
    return result


@tool(writes=True)
def create_issue(
    db: Db,
    project_id: str,
    title: str,
    type: Literal["bug", "task", "story"],
    priority: Priority = "medium",
    description: str = "",
    assignee: str | None = None,
    labels: list[str] | None = None,
) -> dict:
    """Create an issue in the backlog of a project.

    Args:
        project_id: The project key, e.g. "WEB".
        title: A short summary.
        type: bug, task or story.
        priority: low, medium, high or urgent.
        description: Details, steps to reproduce, acceptance criteria.
        assignee: Handle of a project member to assign, e.g. "jkim".
        labels: Names of existing project labels, e.g. ["frontend"].
    """
    project = _project(db, project_id, write=True)
    key = project["project_id"]
    if not title.strip():
        raise ToolError("an issue needs a title")
    assignee_id = _member_by_handle(db, key, assignee)["id"] if assignee else None
    label_ids = []
    for name in labels or []:
        row = db.one("SELECT label_id FROM labels WHERE project_id = ? AND lower(name) = lower(?)", key, name)
        if row is None:
            raise ToolError(f"no label {name!r} in {key}")
        label_ids.append(row["label_id"])
    issue_id = db.new_id(key)
    db.execute(
        "INSERT INTO issues (issue_id, project_id, title, description, type, status, priority, assignee_id, "
        "reporter_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 'backlog', ?, ?, ?, ?, ?)",
        issue_id,
        key,
        title.strip(),
        description.strip(),
        type,
        priority,
        assignee_id,
        db.user_id,
        db.now(),
        db.now(),
    )
    for label_id in sorted(set(label_ids)):
        db.execute("INSERT INTO issue_labels VALUES (?, ?)", issue_id, label_id)
    return {
        "issue_id": issue_id,
        "status": "backlog",
        "assignee": _handle(db, assignee_id),
        "labels": _labels(db, issue_id),
    }


@tool(writes=True)
def assign_issue(db: Db, issue_id: str, assignee: str | None) -> dict:
    """Assign an issue to a project member, or unassign it with null.

    Args:
        issue_id: The issue key, e.g. "WEB-102".
        assignee: Handle of a member of the issue's project, e.g. "jkim"; null to unassign.
    """
    issue, project = _issue(db, issue_id, write=True)
    new_id = _member_by_handle(db, project["project_id"], assignee)["id"] if assignee else None
    if new_id == issue["assignee_id"]:
        raise ToolError(f"{issue['issue_id']} is already assigned to {_handle(db, new_id) or 'nobody'}")
    if new_id is None and issue["status"] == "in_progress":
        raise ToolError("an issue in progress must keep an assignee")
    db.execute(
        "UPDATE issues SET assignee_id = ?, updated_at = ? WHERE issue_id = ?",
        new_id,
        db.now(),
        issue["issue_id"],
    )
    _log(db, issue["issue_id"], "assignee", _handle(db, issue["assignee_id"]), _handle(db, new_id))
    return {"issue_id": issue["issue_id"], "assignee": _handle(db, new_id)}


@tool(writes=True)
def transition_issue(db: Db, issue_id: str, status: Status) -> dict:
    """Move an issue to another workflow status, following the workflow rules.

    Args:
        issue_id: The issue key, e.g. "WEB-103".
        status: The target status.
    """
    issue, project = _issue(db, issue_id, write=True)
    old = issue["status"]
    if status not in TRANSITIONS[old]:
        allowed = ", ".join(sorted(TRANSITIONS[old]))
        raise ToolError(f"{issue['issue_id']} cannot go from {old} to {status}; allowed: {allowed}")
    if (status == "closed" or old == "closed") and project["role"] != "admin":
        raise ToolError("only project admins can close or reopen closed issues")
    if status == "in_progress":
        if issue["assignee_id"] is None:
            raise ToolError(f"assign {issue['issue_id']} before starting it")
        if issue["type"] == "story" and issue["story_points"] is None:
            raise ToolError(f"estimate story {issue['issue_id']} (story points) before starting it")
        busy = db.one(
            "SELECT count(*) AS n FROM issues WHERE project_id = ? AND assignee_id = ? AND status = 'in_progress'",
            issue["project_id"],
            issue["assignee_id"],
        )
        if busy and busy["n"] >= WIP_LIMIT:
            who = _handle(db, issue["assignee_id"])
            raise ToolError(f"@{who} already has {WIP_LIMIT} issues in progress in {issue['project_id']}")
    if old == "in_review" and status == "done" and issue["assignee_id"] == db.user_id:
        raise ToolError("you cannot approve your own issue; another member must move it to done")
    db.execute(
        "UPDATE issues SET status = ?, updated_at = ? WHERE issue_id = ?", status, db.now(), issue["issue_id"]
    )
    _log(db, issue["issue_id"], "status", old, status)
    return {"issue_id": issue["issue_id"], "old_status": old, "status": status}


@tool(writes=True)
def add_comment(db: Db, issue_id: str, body: str) -> dict:
    """Comment on an issue as the signed-in user.

    Args:
        issue_id: The issue key, e.g. "WEB-105".
        body: The comment text.
    """
    issue, _ = _issue(db, issue_id, write=True)
    if not body.strip():
        raise ToolError("a comment cannot be empty")
    comment_id = db.new_id("CMT")
    db.execute(
        "INSERT INTO comments VALUES (?, ?, ?, ?, ?)",
        comment_id,
        issue["issue_id"],
        db.user_id,
        body.strip(),
        db.now(),
    )
    db.execute("UPDATE issues SET updated_at = ? WHERE issue_id = ?", db.now(), issue["issue_id"])
    return {"comment_id": comment_id, "issue_id": issue["issue_id"]}


@tool(writes=True)
def update_labels(
    db: Db, issue_id: str, add: list[str] | None = None, remove: list[str] | None = None
) -> dict:
    """Add or remove labels on an issue (labels must exist in the issue's project).

    Args:
        issue_id: The issue key, e.g. "WEB-109".
        add: Label names to add.
        remove: Label names to remove.
    """
    issue, project = _issue(db, issue_id, write=True)
    if not add and not remove:
        raise ToolError("give labels to add or remove")
    current = set(_labels(db, issue["issue_id"]))
    for name in add or []:
        row = db.one(
            "SELECT label_id, name FROM labels WHERE project_id = ? AND lower(name) = lower(?)",
            project["project_id"],
            name,
        )
        if row is None:
            raise ToolError(f"no label {name!r} in {project['project_id']}")
        if row["name"] not in current:
            db.execute("INSERT INTO issue_labels VALUES (?, ?)", issue["issue_id"], row["label_id"])
            current.add(row["name"])
    for name in remove or []:
        match = next((c for c in current if c.lower() == name.lower()), None)
        if match is None:
            raise ToolError(f"{issue['issue_id']} has no label {name!r}")
        db.execute(
            "DELETE FROM issue_labels WHERE issue_id = ? AND label_id = "
            "(SELECT label_id FROM labels WHERE project_id = ? AND name = ?)",
            issue["issue_id"],
            project["project_id"],
            match,
        )
        current.discard(match)
    db.execute("UPDATE issues SET updated_at = ? WHERE issue_id = ?", db.now(), issue["issue_id"])
    return {"issue_id": issue["issue_id"], "labels": sorted(current)}


@tool(writes=True)
def update_issue(
    db: Db,
    issue_id: str,
    title: str | None = None,
    priority: Priority | None = None,
    story_points: int | None = None,
    due_date: str | None = None,
) -> dict:
    """Change an issue's title, priority, story points or due date (only the fields given).

    Args:
        issue_id: The issue key, e.g. "WEB-110".
        title: New title.
        priority: New priority.
        story_points: New estimate: 1, 2, 3, 5, 8 or 13.
        due_date: New due date, YYYY-MM-DD.
    """
    issue, _ = _issue(db, issue_id, write=True)
    changes: dict[str, object] = {}
    if title is not None:
        if not title.strip():
            raise ToolError("the title cannot be empty")
        changes["title"] = title.strip()
    if priority is not None:
        changes["priority"] = priority
    if story_points is not None:
        if story_points not in POINTS:
            raise ToolError(f"story points must be one of {', '.join(map(str, POINTS))}")
        changes["story_points"] = story_points
    if due_date is not None:
        try:
            day = date.fromisoformat(due_date)
        except ValueError:
            raise ToolError(f"due_date must look like 2025-06-15, got {due_date!r}") from None
        if day.isoformat() < db.today():
            raise ToolError("the due date cannot be in the past")
        changes["due_date"] = day.isoformat()
    changes = {k: v for k, v in changes.items() if issue[k] != v}
    if not changes:
        raise ToolError("nothing to change")
    for field, value in changes.items():
        db.execute(f"UPDATE issues SET {field} = ? WHERE issue_id = ?", value, issue["issue_id"])
        _log(db, issue["issue_id"], field, issue[field], value)
    db.execute("UPDATE issues SET updated_at = ? WHERE issue_id = ?", db.now(), issue["issue_id"])
    return {"issue_id": issue["issue_id"], **changes}


@tool(writes=True)
def move_to_sprint(db: Db, issue_id: str, sprint_id: str | None) -> dict:
    """Put an issue into a planned or active sprint of its project, or back to no sprint with null.

    Args:
        issue_id: The issue key, e.g. "WEB-107".
        sprint_id: The sprint, e.g. "SPR-WEB-15"; null to remove it from its sprint.
    """
    issue, project = _issue(db, issue_id, write=True)
    if issue["status"] == "closed" and project["role"] != "admin":
        raise ToolError("only admins can change the sprint of a closed issue")
    if sprint_id is not None:
        sprint = db.one("SELECT * FROM sprints WHERE sprint_id = ?", sprint_id)
        if sprint is None or sprint["project_id"] != issue["project_id"]:
            raise ToolError(f"no sprint {sprint_id} in {issue['project_id']}")
        if sprint["state"] == "closed":
            raise ToolError(f"sprint {sprint_id} is closed")
    if sprint_id == issue["sprint_id"]:
        raise ToolError(f"{issue['issue_id']} is already in {sprint_id or 'no sprint'}")
    db.execute(
        "UPDATE issues SET sprint_id = ?, updated_at = ? WHERE issue_id = ?",
        sprint_id,
        db.now(),
        issue["issue_id"],
    )
    _log(db, issue["issue_id"], "sprint", issue["sprint_id"], sprint_id)
    return {"issue_id": issue["issue_id"], "sprint_id": sprint_id}
