"""The live side: websockets only.

The consumer that streams a session's drawer to its page, its routing, and announcing
stored events to the session's channel-layer group (sending; the event log that stores
them is taskos/store/event_log.py).
"""
