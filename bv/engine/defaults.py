"""The defaults of how requests are sent, written once and importing nothing: the settings
declared on bv.stages.request_settings.RequestSettings take them (and so every face, bv.cli's
options and bv.api's keywords), and the engine's own signatures."""

JOBS = 8  # requests in flight at once
RETRIES = 5  # tries more per request on 5xx, timeouts and dropped connections
TIMEOUT_S = 600.0  # per try of a request, all told
RATE_LIMIT_PATIENCE_S = 900.0  # how long one request goes on retrying 429s, from its first one
CONNECT_TIMEOUT_S = 10.0  # an endpoint that does not accept a connection in this long is unreachable
STALL_NOTICE_S = 30.0  # no reply for this long: the progress line says so
CACHE_SCOPE = "model"  # the cache keys an OpenAI-compatible model's replies by its name, not its URLs
CACHE_SCOPES = ("model", "endpoint")
