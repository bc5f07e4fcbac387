"""Two-way CalDAV sync: the calendar the user's phone shows, kept in step with the local store.

The local SQLite store stays the working copy: the assistant answers from it whatever the
network does. Changes go out through a durable queue filled by triggers in the same transaction
as the change (``schema`` migration 7); server changes come in by sync token (RFC 6578) or, where
a server has none, by ETag comparison; a change made on both sides is merged field by field and
the server wins a field both changed, the local value kept in a conflict record.

    settings  what to sync, the password (0600 file or the Keychain), the https rule
    state     the queue, what the server holds (href, ETag, the last copy), tokens, conflicts
    objects   one event ⇄ one iCalendar object, keeping what the server wrote that we do not model
    merge     the three-way, field-by-field merge
    identity  what a server object may touch: one object one UID, one UID one calendar
    engine    one sync: pull, then push, under a lock no second process can share
    connection  the server as the sync sees it: the counted client, the calendars found, failures in one line
    lock      one process syncs a calendar at a time
    report    what one sync did (one line), and how a sync that could not finish failed
    service   when it runs: at start, every interval, before and after a turn
"""
