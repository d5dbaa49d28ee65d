"""What one request may carry, as the API has it. The node checks these
(node/http/rules/messages.py, node/http/rules/queries.py); the SDK, the Celery transport
and the Dramatiq broker split their work to fit them. tests/client/test_limits.py keeps the
two sides equal."""

MAX_ITEMS = 1000  # messages one pull hands out; receipts in one ack, nack or extend
MAX_PENDING_PAGE = 1000  # messages on one page of a pending list
MAX_WAIT_MS = 30_000  # how long a pull may wait for a message (a long poll)
MAX_AHEAD_MS = 1_000  # how early a pull may take messages (the wheel fires no earlier)
MIN_VISIBILITY_MS, MAX_VISIBILITY_MS = 100, 12 * 3_600_000  # a lease's length, as a pull takes it
