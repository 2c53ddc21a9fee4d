"""Twenty in-process MCP servers with 500 tools between them, and tasks that each need one.

The servers look like the ones people connect (a code host, a tracker, chat, mail, a
calendar, files, a database, cloud storage, a cluster, payments, a CRM...): per server
four kinds of thing, each with list/get/create/update/delete tools, and five tools of its
own, with descriptions and parameters in the style real servers use. ``TASKS`` pairs a
request as a person types it with the tool it needs (the scripted model searches with the
person's words, not with keywords chosen to match). Used by ``bench/tool_search.py`` and
``tests/host/test_tool_search.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

# server: (what it is, [(thing, things, {field: description})], [(tool, description, {param: description})])
Entity = tuple[str, str, dict[str, str]]
Special = tuple[str, str, dict[str, str]]

CATALOG: dict[str, tuple[str, list[Entity], list[Special]]] = {
    "github": (
        "a GitHub repository",
        [
            ("issue", "issues", {"title": "short summary", "body": "markdown text", "labels": "label names", "assignees": "logins"}),
            ("pull_request", "pull requests", {"title": "summary", "head": "source branch", "base": "target branch", "draft": "open as draft"}),
            ("release", "releases", {"tag_name": "git tag", "name": "release title", "body": "release notes"}),
            ("webhook", "webhooks", {"url": "payload URL", "events": "event names", "active": "deliver events"}),
        ],
        [
            ("merge_pull_request", "Merge a pull request into its base branch (merge, squash or rebase).", {"number": "pull request number", "method": "merge|squash|rebase"}),
            ("search_code", "Search source code across repositories with GitHub code search syntax.", {"query": "search terms", "language": "programming language"}),
            ("create_branch", "Create a git branch from a commit or another branch.", {"branch": "new branch name", "from_ref": "starting ref"}),
            ("get_file_contents", "Read a file or list a directory of a repository at a ref.", {"path": "file path", "ref": "branch, tag or sha"}),
            ("list_commits", "List the commits of a branch, newest first, with author and message.", {"sha": "branch or sha", "author": "login"}),
        ],
    ),
    "jira": (
        "a Jira project",
        [
            ("ticket", "tickets", {"summary": "one line", "description": "details", "priority": "Highest..Lowest", "issue_type": "Bug, Story, Task"}),
            ("sprint", "sprints", {"name": "sprint name", "start_date": "date", "end_date": "date", "goal": "sprint goal"}),
            ("epic", "epics", {"name": "epic name", "summary": "one line", "color": "epic colour"}),
            ("worklog", "work logs", {"ticket_key": "e.g. PROJ-12", "time_spent": "e.g. 2h 30m", "comment": "what was done"}),
        ],
        [
            ("transition_ticket", "Move a ticket to another workflow status (To Do, In Progress, Done).", {"ticket_key": "e.g. PROJ-12", "status": "target status"}),
            ("assign_ticket", "Assign a ticket to a user.", {"ticket_key": "key", "account_id": "assignee"}),
            ("search_jql", "Search tickets with a JQL query.", {"jql": "JQL text", "max_results": "limit"}),
            ("add_ticket_comment", "Add a comment to a ticket.", {"ticket_key": "key", "body": "comment text"}),
            ("get_board", "Get a Scrum or Kanban board with its columns.", {"board_id": "board"}),
        ],
    ),
    "slack": (
        "a Slack workspace",
        [
            ("channel", "channels", {"name": "channel name", "is_private": "private channel", "topic": "channel topic"}),
            ("reminder", "reminders", {"text": "what to remind", "time": "when", "user": "who"}),
            ("user_group", "user groups", {"handle": "mention handle", "name": "group name", "users": "member ids"}),
            ("bookmark", "channel bookmarks", {"channel": "channel id", "title": "title", "link": "URL"}),
        ],
        [
            ("post_message", "Send a message to a channel or a direct message to a person.", {"channel": "channel id or name", "text": "message text", "thread_ts": "reply in thread"}),
            ("search_messages", "Search messages across channels you can read.", {"query": "search text", "sort": "score or timestamp"}),
            ("add_reaction", "Add an emoji reaction to a message.", {"channel": "channel", "timestamp": "message ts", "emoji": "emoji name"}),
            ("get_channel_history", "Read recent messages of a channel.", {"channel": "channel id", "limit": "how many"}),
            ("set_status", "Set your status text and emoji, with an expiry.", {"status_text": "text", "status_emoji": "emoji", "expiration": "when it clears"}),
        ],
    ),
    "gmail": (
        "a Gmail mailbox",
        [
            ("draft", "drafts", {"to": "recipients", "subject": "subject line", "body": "message body"}),
            ("label", "labels", {"name": "label name", "color": "label colour"}),
            ("filter", "mail filters", {"from_address": "sender to match", "has_words": "words", "add_label": "label to apply"}),
            ("contact", "contacts", {"name": "full name", "email": "email address", "phone": "phone number"}),
        ],
        [
            ("send_email", "Send an email message now, with optional cc, bcc and attachments.", {"to": "recipients", "subject": "subject", "body": "text", "cc": "copy to"}),
            ("search_emails", "Search the mailbox with Gmail search operators (from:, subject:, has:attachment).", {"query": "search", "max_results": "limit"}),
            ("read_email", "Read one email message with its headers, body and attachment names.", {"message_id": "message id"}),
            ("archive_email", "Archive messages: remove them from the inbox.", {"message_ids": "ids"}),
            ("reply_to_email", "Reply to an email thread.", {"thread_id": "thread", "body": "reply text", "reply_all": "reply to everyone"}),
        ],
    ),
    "calendar": (
        "a Google Calendar",
        [
            ("event", "events", {"summary": "event title", "start": "start time", "end": "end time", "attendees": "emails", "location": "place"}),
            ("calendar", "calendars", {"summary": "calendar name", "time_zone": "IANA zone"}),
            ("acl_rule", "sharing rules", {"calendar_id": "calendar", "role": "reader, writer, owner", "scope": "user or group email"}),
            ("working_location", "working locations", {"date": "day", "kind": "home, office, custom"}),
        ],
        [
            ("find_free_time", "Find time slots when all attendees are free, within working hours.", {"attendees": "emails", "duration_minutes": "meeting length", "between": "time range"}),
            ("respond_to_invitation", "Accept, decline or tentatively accept a meeting invitation.", {"event_id": "event", "response": "accepted, declined, tentative"}),
            ("quick_add_event", "Create an event from a sentence such as 'Lunch with Ana Friday 1pm'.", {"text": "sentence"}),
            ("move_event", "Move an event to another calendar.", {"event_id": "event", "destination": "calendar id"}),
            ("list_upcoming_events", "List the next events on your calendars, today and after.", {"days": "how many days ahead"}),
        ],
    ),
    "files": (
        "the local file system under the allowed folders",
        [
            ("directory", "directories", {"path": "folder path", "recursive": "include sub-folders"}),
            ("symlink", "symbolic links", {"path": "link path", "target": "what it points to"}),
            ("archive", "zip archives", {"path": "archive path", "sources": "files to include"}),
            ("watch", "file watches", {"path": "folder to watch", "pattern": "glob of files"}),
        ],
        [
            ("read_file", "Read the text of a file.", {"path": "file path", "encoding": "text encoding"}),
            ("write_file", "Write text to a file, replacing it or creating it.", {"path": "file path", "content": "text"}),
            ("move_file", "Move or rename a file or folder.", {"source": "from", "destination": "to"}),
            ("search_files", "Find files whose names match a glob pattern, recursively.", {"path": "where", "pattern": "glob such as *.py"}),
            ("get_file_info", "Get a file's size, timestamps and permissions.", {"path": "file path"}),
        ],
    ),
    "postgres": (
        "a PostgreSQL database",
        [
            ("table", "tables", {"schema": "schema name", "name": "table name", "columns": "column definitions"}),
            ("index", "indexes", {"table": "table", "columns": "indexed columns", "unique": "unique index"}),
            ("role", "database roles", {"name": "role name", "login": "may log in", "password": "password"}),
            ("extension", "extensions", {"name": "extension such as pg_trgm", "version": "version"}),
        ],
        [
            ("run_query", "Run a read-only SQL SELECT query and return the rows.", {"sql": "SQL text", "params": "bind parameters"}),
            ("execute_statement", "Run a SQL statement that changes data (INSERT, UPDATE, DELETE).", {"sql": "SQL text"}),
            ("explain_query", "Show the query plan of a SQL query (EXPLAIN ANALYZE).", {"sql": "SQL text", "analyze": "run it"}),
            ("describe_table", "Describe a table: columns, types, constraints, indexes.", {"table": "table name"}),
            ("list_slow_queries", "List the slowest queries from pg_stat_statements.", {"limit": "how many"}),
        ],
    ),
    "s3": (
        "AWS S3 object storage",
        [
            ("bucket", "buckets", {"bucket": "bucket name", "region": "AWS region", "versioning": "keep versions"}),
            ("object", "objects", {"bucket": "bucket", "key": "object key", "content_type": "MIME type"}),
            ("lifecycle_rule", "lifecycle rules", {"bucket": "bucket", "prefix": "key prefix", "expire_days": "delete after days"}),
            ("bucket_policy", "bucket policies", {"bucket": "bucket", "policy": "IAM policy JSON"}),
        ],
        [
            ("upload_file", "Upload a local file to a bucket.", {"bucket": "bucket", "key": "object key", "file_path": "local file"}),
            ("download_file", "Download an object to a local file.", {"bucket": "bucket", "key": "key", "file_path": "where to save"}),
            ("presign_url", "Make a pre-signed URL so someone can download an object without credentials.", {"bucket": "bucket", "key": "key", "expires_in": "seconds"}),
            ("copy_object", "Copy an object to another key or bucket.", {"source": "bucket/key", "destination": "bucket/key"}),
            ("get_bucket_size", "Total size and object count of a bucket.", {"bucket": "bucket"}),
        ],
    ),
    "kubernetes": (
        "a Kubernetes cluster",
        [
            ("deployment", "deployments", {"namespace": "namespace", "name": "deployment", "image": "container image", "replicas": "pod count"}),
            ("service", "services", {"namespace": "namespace", "name": "service", "port": "port", "type": "ClusterIP, LoadBalancer"}),
            ("config_map", "config maps", {"namespace": "namespace", "name": "name", "data": "key values"}),
            ("namespace", "namespaces", {"name": "namespace", "labels": "labels"}),
        ],
        [
            ("get_pod_logs", "Read the logs of a pod's container.", {"namespace": "namespace", "pod": "pod name", "tail_lines": "last lines"}),
            ("scale_deployment", "Change the number of replicas of a deployment.", {"namespace": "namespace", "name": "deployment", "replicas": "count"}),
            ("rollout_restart", "Restart every pod of a deployment, one by one.", {"namespace": "namespace", "name": "deployment"}),
            ("list_pods", "List pods with their status, restarts and node.", {"namespace": "namespace", "selector": "label selector"}),
            ("exec_in_pod", "Run a command inside a pod's container.", {"pod": "pod", "command": "argv"}),
        ],
    ),
    "stripe": (
        "a Stripe account",
        [
            ("customer", "customers", {"email": "email", "name": "name", "metadata": "key values"}),
            ("subscription", "subscriptions", {"customer": "customer id", "price": "price id", "trial_days": "free trial"}),
            ("invoice", "invoices", {"customer": "customer id", "due_date": "date", "items": "line items"}),
            ("coupon", "coupons", {"percent_off": "discount percent", "duration": "once, repeating, forever"}),
        ],
        [
            ("create_refund", "Refund a charge, fully or partly.", {"charge": "charge id", "amount": "cents", "reason": "why"}),
            ("create_payment_link", "Make a shareable payment link for a product.", {"price": "price id", "quantity": "quantity"}),
            ("get_balance", "The account's available and pending balance by currency.", {}),
            ("list_disputes", "List chargebacks and disputes with their status.", {"status": "status"}),
            ("send_invoice", "Email a finalized invoice to its customer.", {"invoice": "invoice id"}),
        ],
    ),
    "hubspot": (
        "a HubSpot CRM",
        [
            ("contact", "CRM contacts", {"email": "email", "firstname": "first name", "lastname": "last name", "company": "company"}),
            ("deal", "deals", {"dealname": "name", "amount": "value", "dealstage": "pipeline stage", "closedate": "expected close"}),
            ("company", "companies", {"name": "company name", "domain": "web domain", "industry": "industry"}),
            ("note", "notes", {"body": "note text", "associated_id": "contact, deal or company"}),
        ],
        [
            ("log_call", "Log a phone call with a contact.", {"contact_id": "contact", "duration": "minutes", "outcome": "what happened"}),
            ("enroll_in_sequence", "Enroll a contact in an email sequence.", {"contact_id": "contact", "sequence_id": "sequence"}),
            ("get_pipeline", "Get a deal pipeline with its stages.", {"pipeline_id": "pipeline"}),
            ("search_crm", "Search contacts, companies and deals by any property.", {"query": "text", "object_type": "contacts, companies, deals"}),
            ("create_task_for_rep", "Create a follow-up task for a sales rep.", {"owner_id": "rep", "title": "task", "due": "date"}),
        ],
    ),
    "notion": (
        "a Notion workspace",
        [
            ("page", "pages", {"parent": "parent page or database", "title": "title", "content": "blocks"}),
            ("database", "databases", {"parent": "parent page", "title": "title", "properties": "property schema"}),
            ("block", "blocks", {"block_id": "block", "type": "paragraph, heading, to_do", "text": "text"}),
            ("comment", "page comments", {"page_id": "page", "text": "comment"}),
        ],
        [
            ("query_database", "Query a database's rows with filters and sorts.", {"database_id": "database", "filter": "filter object", "sorts": "sort order"}),
            ("search_workspace", "Search pages and databases by title.", {"query": "text"}),
            ("append_to_page", "Append blocks of text to the end of a page.", {"page_id": "page", "markdown": "text"}),
            ("duplicate_page", "Duplicate a page with its children.", {"page_id": "page"}),
            ("export_page_markdown", "Export a page as Markdown.", {"page_id": "page"}),
        ],
    ),
    "sentry": (
        "Sentry error monitoring",
        [
            ("project", "Sentry projects", {"slug": "project slug", "platform": "python, javascript..."}),
            ("alert_rule", "alert rules", {"project": "project", "conditions": "when to alert", "actions": "who is told"}),
            ("release", "Sentry releases", {"version": "release version", "projects": "projects"}),
            ("team", "teams", {"slug": "team slug", "name": "team name"}),
        ],
        [
            ("list_unresolved_errors", "List unresolved error groups of a project, most frequent first.", {"project": "project", "environment": "production..."}),
            ("get_error_details", "An error group's stack trace, tags and latest event.", {"issue_id": "error group id"}),
            ("resolve_error", "Mark an error group resolved (or resolved in the next release).", {"issue_id": "error group", "in_next_release": "flag"}),
            ("ignore_error", "Ignore an error group for a while or until it happens again N times.", {"issue_id": "error group", "duration": "minutes"}),
            ("get_error_rate", "Error counts over time for a project.", {"project": "project", "interval": "1h, 1d"}),
        ],
    ),
    "shopify": (
        "a Shopify store",
        [
            ("product", "products", {"title": "product name", "price": "price", "inventory": "stock", "tags": "tags"}),
            ("order", "orders", {"customer": "customer", "line_items": "products and quantities", "status": "open, closed"}),
            ("collection", "collections", {"title": "collection name", "rules": "smart collection rules"}),
            ("discount_code", "discount codes", {"code": "code", "value": "amount or percent", "ends_at": "expiry"}),
        ],
        [
            ("fulfill_order", "Mark an order shipped, with a tracking number.", {"order_id": "order", "tracking_number": "tracking", "carrier": "carrier"}),
            ("adjust_inventory", "Adjust the stock level of a product variant at a location.", {"variant_id": "variant", "delta": "change", "location": "warehouse"}),
            ("cancel_order", "Cancel an order and optionally refund and restock it.", {"order_id": "order", "refund": "refund it", "restock": "restock"}),
            ("get_sales_report", "Sales totals by day, product or channel.", {"from_date": "start", "to_date": "end", "group_by": "day, product"}),
            ("list_abandoned_checkouts", "List checkouts customers left without paying.", {"since": "date"}),
        ],
    ),
    "zoom": (
        "a Zoom account",
        [
            ("meeting", "Zoom meetings", {"topic": "meeting topic", "start_time": "when", "duration": "minutes", "password": "passcode"}),
            ("webinar", "webinars", {"topic": "topic", "start_time": "when", "panelists": "emails"}),
            ("recording", "cloud recordings", {"meeting_id": "meeting"}),
            ("room", "Zoom Rooms", {"name": "room name", "location": "office"}),
        ],
        [
            ("get_meeting_transcript", "The transcript of a recorded meeting.", {"meeting_id": "meeting"}),
            ("add_registrant", "Register a person for a webinar or meeting.", {"meeting_id": "meeting", "email": "email", "name": "name"}),
            ("end_meeting", "End a meeting that is running, for everyone.", {"meeting_id": "meeting"}),
            ("get_participants", "Who attended a past meeting, and for how long.", {"meeting_id": "meeting"}),
            ("get_join_link", "The join URL of a meeting.", {"meeting_id": "meeting"}),
        ],
    ),
    "drive": (
        "Google Drive",
        [
            ("folder", "Drive folders", {"name": "folder name", "parent": "parent folder"}),
            ("document", "Google Docs documents", {"title": "title", "text": "document text"}),
            ("spreadsheet", "Google Sheets spreadsheets", {"title": "title", "sheets": "sheet names"}),
            ("permission", "sharing permissions", {"file_id": "file", "email": "who", "role": "reader, commenter, writer"}),
        ],
        [
            ("search_drive", "Search Drive files by name and full text.", {"query": "text", "mime_type": "type"}),
            ("read_sheet_range", "Read cell values of a spreadsheet range such as Sheet1!A1:D20.", {"spreadsheet_id": "sheet", "range": "A1 range"}),
            ("append_sheet_rows", "Append rows of values to a spreadsheet.", {"spreadsheet_id": "sheet", "rows": "values"}),
            ("export_file_pdf", "Export a Doc, Sheet or Slides file as PDF.", {"file_id": "file"}),
            ("list_shared_with_me", "List files others shared with you.", {"limit": "how many"}),
        ],
    ),
    "weather": (
        "a weather service",
        [
            ("alert_subscription", "weather alert subscriptions", {"location": "place", "severity": "minor..extreme"}),
            ("saved_location", "saved locations", {"name": "label", "latitude": "lat", "longitude": "lon"}),
            ("station", "weather stations", {"station_id": "station", "name": "name"}),
            ("report", "scheduled weather reports", {"location": "place", "time": "daily at"}),
        ],
        [
            ("get_forecast", "The forecast for a place: temperature, rain and wind, hour by hour for 7 days.", {"location": "city or coordinates", "days": "days ahead"}),
            ("get_current_conditions", "Current temperature, humidity, wind and sky at a place.", {"location": "city"}),
            ("get_air_quality", "Air quality index and pollen levels at a place.", {"location": "city"}),
            ("get_historical_weather", "Past weather at a place on a date.", {"location": "city", "date": "day"}),
            ("get_severe_alerts", "Active storm, flood and heat warnings for an area.", {"area": "region"}),
        ],
    ),
    "maps": (
        "a maps and places service",
        [
            ("place", "saved places", {"name": "place name", "address": "address", "list": "list name"}),
            ("place_list", "place lists", {"name": "list name", "shared": "shared"}),
            ("geofence", "geofences", {"center": "coordinates", "radius_m": "metres"}),
            ("route_plan", "saved route plans", {"stops": "addresses", "mode": "driving, walking"}),
        ],
        [
            ("get_directions", "Directions and travel time between two places by car, transit, bike or on foot.", {"origin": "from", "destination": "to", "mode": "travel mode"}),
            ("search_nearby", "Find places of a kind near a location (restaurants, pharmacies, gas stations).", {"location": "near", "keyword": "what", "radius_m": "metres"}),
            ("geocode_address", "Turn a street address into latitude and longitude.", {"address": "address"}),
            ("reverse_geocode", "Turn coordinates into a street address.", {"latitude": "lat", "longitude": "lon"}),
            ("distance_matrix", "Travel times between many origins and destinations.", {"origins": "places", "destinations": "places"}),
        ],
    ),
    "spotify": (
        "a Spotify account",
        [
            ("playlist", "playlists", {"name": "playlist name", "public": "public", "description": "description"}),
            ("saved_track", "liked songs", {"track_id": "track"}),
            ("followed_artist", "followed artists", {"artist_id": "artist"}),
            ("queue_item", "queued tracks", {"uri": "track uri"}),
        ],
        [
            ("play", "Start or resume playback of a track, album or playlist.", {"uri": "what to play", "device_id": "device"}),
            ("pause", "Pause playback.", {"device_id": "device"}),
            ("skip_to_next", "Skip to the next track.", {"device_id": "device"}),
            ("search_music", "Search tracks, albums and artists.", {"query": "text", "type": "track, album, artist"}),
            ("get_recommendations", "Recommend tracks like given seed tracks or genres.", {"seed_tracks": "tracks", "seed_genres": "genres"}),
        ],
    ),
    "pagerduty": (
        "PagerDuty incident response",
        [
            ("incident", "incidents", {"title": "what is wrong", "service": "service id", "urgency": "high, low"}),
            ("schedule", "on-call schedules", {"name": "schedule", "time_zone": "zone", "layers": "rotations"}),
            ("escalation_policy", "escalation policies", {"name": "policy", "rules": "who, after how long"}),
            ("maintenance_window", "maintenance windows", {"services": "services", "start_time": "start", "end_time": "end"}),
        ],
        [
            ("acknowledge_incident", "Acknowledge an incident so it stops escalating.", {"incident_id": "incident"}),
            ("resolve_incident", "Resolve an incident.", {"incident_id": "incident", "resolution": "note"}),
            ("who_is_on_call", "Who is on call now for a schedule or escalation policy.", {"schedule_id": "schedule"}),
            ("add_incident_note", "Add a timeline note to an incident.", {"incident_id": "incident", "note": "text"}),
            ("page_responder", "Page an extra responder onto an incident.", {"incident_id": "incident", "user_id": "who"}),
        ],
    ),
}


def _plural(word: str) -> str:
    if word.endswith("y"):
        return word[:-1] + "ies"
    return word + ("es" if word.endswith(("s", "x", "sh", "ch")) else "s")


def _crud(where: str, thing: str, things: str, fields: dict[str, str]) -> list[Special]:
    names = ", ".join(fields)
    id_param = {f"{thing}_id": f"the {thing.replace('_', ' ')} id"}
    return [
        (f"list_{_plural(thing)}", f"List {things} in {where}, newest first, paginated. Filter by {names}.",
         {"filter": "field filters", "limit": "page size", "cursor": "next page"}),
        (f"get_{thing}", f"Get one of the {things} by id, with its {names}.", id_param),
        (f"create_{thing}", f"Create a new {thing.replace('_', ' ')} in {where}.", fields),
        (f"update_{thing}", f"Update an existing {thing.replace('_', ' ')}: change its {names}.", id_param | fields),
        (f"delete_{thing}", f"Delete a {thing.replace('_', ' ')} permanently.", id_param),
    ]


def tools_of(server: str) -> list[Special]:
    """Every tool of one server: (name, description, {parameter: description})."""
    where, entities, specials = CATALOG[server]
    listed = [tool for thing, things, fields in entities for tool in _crud(where, thing, things, fields)]
    return listed + specials


def server_for(name: str) -> Any:
    """An in-process modelctx ``Server`` named ``name`` with the catalog's tools; each
    answers with its name and arguments."""
    from modelctx import Server

    server = Server(name)
    for tool, description, params in tools_of(name):
        schema = {
            "type": "object",
            "properties": {p: {"type": "string", "description": d} for p, d in params.items()},
        }

        def answer(_tool: str = tool, **arguments: Any) -> dict[str, Any]:
            return {"tool": _tool, "arguments": arguments}

        server.tool(answer, name=tool, description=description, input_schema=schema)
    return server


# (what a person asks, the tool it needs)
TASKS: list[tuple[str, str]] = [
    ("open a github issue saying the login page crashes on Safari", "github_create_issue"),
    ("squash and merge pull request 42 on github", "github_merge_pull_request"),
    ("what changed in the latest commits on the main branch in github", "github_list_commits"),
    ("show me the README file of our github repo", "github_get_file_contents"),
    ("publish a github release v2.1 with notes", "github_create_release"),
    ("move jira ticket PROJ-12 to Done", "jira_transition_ticket"),
    ("log 2 hours of work on the jira ticket PROJ-7", "jira_create_worklog"),
    ("find all jira bugs with high priority using JQL", "jira_search_jql"),
    ("start a new sprint in jira called Sprint 14", "jira_create_sprint"),
    ("assign the jira ticket PROJ-99 to Maria", "jira_assign_ticket"),
    ("post a message in the #deploys slack channel that the release is out", "slack_post_message"),
    ("search slack messages about the outage", "slack_search_messages"),
    ("set my slack status to 'in a meeting'", "slack_set_status"),
    ("remind me on slack tomorrow at 9 to call the bank", "slack_create_reminder"),
    ("send an email to ana@example.com about the invoice", "gmail_send_email"),
    ("find emails from the landlord with attachments", "gmail_search_emails"),
    ("reply to the email thread from Tom saying yes", "gmail_reply_to_email"),
    ("save a draft email to the team about the offsite", "gmail_create_draft"),
    ("when are Ana and Ben both free for a 30 minute meeting this week", "calendar_find_free_time"),
    ("put a dentist appointment on my calendar Tuesday at 3pm", "calendar_create_event"),
    ("decline the calendar invitation for the Friday sync", "calendar_respond_to_invitation"),
    ("what is on my calendar today", "calendar_list_upcoming_events"),
    ("read the file notes/todo.txt", "files_read_file"),
    ("rename report.docx to report-final.docx", "files_move_file"),
    ("find every python file under src", "files_search_files"),
    ("write the summary to a file called summary.md", "files_write_file"),
    ("run a SQL query counting orders per customer in postgres", "postgres_run_query"),
    ("what columns does the users table have", "postgres_describe_table"),
    ("why is this postgres query slow, show the plan", "postgres_explain_query"),
    ("add an index on orders.created_at in postgres", "postgres_create_index"),
    ("upload backup.tar.gz to the s3 bucket archives", "s3_upload_file"),
    ("give me a temporary download link for the s3 object reports/q3.pdf", "s3_presign_url"),
    ("how big is the s3 bucket logs", "s3_get_bucket_size"),
    ("show the logs of the api pod in kubernetes", "kubernetes_get_pod_logs"),
    ("scale the web deployment to 5 replicas", "kubernetes_scale_deployment"),
    ("restart all pods of the checkout deployment", "kubernetes_rollout_restart"),
    ("refund the stripe charge ch_123", "stripe_create_refund"),
    ("cancel the stripe subscription of customer cus_9", "stripe_delete_subscription"),
    ("what is our stripe balance", "stripe_get_balance"),
    ("make a 20 percent off coupon in stripe", "stripe_create_coupon"),
    ("log a call with the contact in hubspot", "hubspot_log_call"),
    ("move the Acme deal to closed won in hubspot", "hubspot_update_deal"),
    ("add a note to the notion page about the roadmap", "notion_append_to_page"),
    ("query the notion tasks database for items due this week", "notion_query_database"),
    ("list the unresolved errors in sentry for the backend project", "sentry_list_unresolved_errors"),
    ("show the stack trace of sentry error 4821", "sentry_get_error_details"),
    ("mark order 1001 as shipped with tracking number 1Z999", "shopify_fulfill_order"),
    ("how much did the shop sell last week", "shopify_get_sales_report"),
    ("create a discount code SUMMER10 in shopify", "shopify_create_discount_code"),
    ("schedule a zoom meeting for Monday 10am", "zoom_create_meeting"),
    ("get the transcript of yesterday's zoom call", "zoom_get_meeting_transcript"),
    ("share the budget spreadsheet with ben@example.com as an editor", "drive_create_permission"),
    ("read cells A1 to D20 of the budget sheet", "drive_read_sheet_range"),
    ("will it rain in Oslo tomorrow", "weather_get_forecast"),
    ("what is the air quality in Delhi right now", "weather_get_air_quality"),
    ("how long does it take to drive from Lyon to Paris", "maps_get_directions"),
    ("find a pharmacy near the central station", "maps_search_nearby"),
    ("play my running playlist on spotify", "spotify_play"),
    ("skip this song", "spotify_skip_to_next"),
    ("acknowledge the pagerduty incident about the database", "pagerduty_acknowledge_incident"),
    ("who is on call right now", "pagerduty_who_is_on_call"),
    ("put the payments service into a maintenance window tonight", "pagerduty_create_maintenance_window"),
]


@contextlib.asynccontextmanager
async def many_tools_host(**options: Any) -> AsyncIterator[Any]:
    """A ``Host`` with the twenty catalog servers, each an in-process modelctx server
    reached through a real ``Client`` (JSON over a memory pipe); ``options`` go to ``Host``
    (default ``approvals=AllowAll()``: these tools only echo)."""
    from modelctx import Client
    from modelctx.host import AllowAll, Host

    host = Host(**({"approvals": AllowAll()} | options))
    try:
        for name in CATALOG:
            client = Client(server_for(name), name=name)
            await client.connect()
            host.register(client)
        yield host
    finally:
        await host.close()
