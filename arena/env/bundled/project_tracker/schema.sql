-- Northwind Tracker: projects, members and roles, sprints, labels, issues, comments and issue history.
CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    handle TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL DEFAULT ''
);

CREATE TABLE projects (
    project_id TEXT PRIMARY KEY CHECK (project_id = upper(project_id)),
    name TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    lead_id INTEGER NOT NULL REFERENCES users(id),
    archived INTEGER NOT NULL DEFAULT 0 CHECK (archived IN (0, 1))
);

CREATE TABLE project_members (
    project_id TEXT NOT NULL REFERENCES projects(project_id),
    user_id INTEGER NOT NULL REFERENCES users(id),
    role TEXT NOT NULL CHECK (role IN ('admin', 'member', 'viewer')),
    PRIMARY KEY (project_id, user_id)
);

CREATE TABLE sprints (
    sprint_id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects(project_id),
    name TEXT NOT NULL,
    start_date TEXT NOT NULL,
    end_date TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('planned', 'active', 'closed')),
    CHECK (end_date > start_date)
);

CREATE TABLE labels (
    label_id INTEGER PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects(project_id),
    name TEXT NOT NULL,
    color TEXT NOT NULL,
    UNIQUE (project_id, name)
);

CREATE TABLE issues (
    issue_id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects(project_id),
    title TEXT NOT NULL CHECK (length(title) > 0),
    description TEXT NOT NULL DEFAULT '',
    type TEXT NOT NULL CHECK (type IN ('bug', 'task', 'story')),
    status TEXT NOT NULL CHECK (status IN ('backlog', 'todo', 'in_progress', 'in_review', 'done', 'closed')),
    priority TEXT NOT NULL CHECK (priority IN ('low', 'medium', 'high', 'urgent')),
    assignee_id INTEGER REFERENCES users(id),
    reporter_id INTEGER NOT NULL REFERENCES users(id),
    sprint_id TEXT REFERENCES sprints(sprint_id),
    story_points INTEGER CHECK (story_points IS NULL OR story_points IN (1, 2, 3, 5, 8, 13)),
    due_date TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE issue_labels (
    issue_id TEXT NOT NULL REFERENCES issues(issue_id),
    label_id INTEGER NOT NULL REFERENCES labels(label_id),
    PRIMARY KEY (issue_id, label_id)
);

CREATE TABLE comments (
    comment_id TEXT PRIMARY KEY,
    issue_id TEXT NOT NULL REFERENCES issues(issue_id),
    author_id INTEGER NOT NULL REFERENCES users(id),
    body TEXT NOT NULL CHECK (length(body) > 0),
    created_at TEXT NOT NULL
);

CREATE TABLE issue_events (
    event_id INTEGER PRIMARY KEY,
    issue_id TEXT NOT NULL REFERENCES issues(issue_id),
    actor_id INTEGER NOT NULL REFERENCES users(id),
    field TEXT NOT NULL,
    old_value TEXT,
    new_value TEXT,
    at TEXT NOT NULL
);
