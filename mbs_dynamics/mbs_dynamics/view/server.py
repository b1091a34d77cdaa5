"""Serving the view to browsers, each connection taken for hostile.

Every browser connection is taken for hostile (Admission): the page and its
websocket are served only under a Host that names this view (a localhost
name, the address served, or an origin of `allowed_origins`), the websocket
only to the page's own Origin (or one of `allowed_origins`) and viser's
protocol, at most MAX_CONNECTIONS at once, a browser's message at most
MAX_MESSAGE_BYTES; what is refused, and a connection closed on a malformed
message, is counted in `refused` and told to `report`, never printed as a
traceback. viser's share button (a tunnel through viser's server on the
internet) is off and its request refused.
"""
from __future__ import annotations

import errno
import http
import ipaddress
import logging
import os
import socket
import threading
import warnings
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

# A browser's websocket messages (its camera, a click) are small: a larger
# one closes its connection (viser's own limit is 50 MB).
MAX_MESSAGE_BYTES = 2**20
# A connection's received messages buffered before it is read no more.
MAX_QUEUED_MESSAGES = 4
# Open websockets (browsers' pages and others) at most; more are refused.
MAX_CONNECTIONS = 128
# Ports tried, from the one asked for, when it is taken.
PORT_TRIES = 100
# Names of this machine a Host or Origin may use, whatever the address served.
LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
EVERY_INTERFACE = frozenset({"0.0.0.0", "::"})


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _origin(scheme: str, hostname: str, port: int | None) -> str:
    """scheme://host[:port] as browsers send it: lower case, IPv6 in
    brackets, no default port."""
    host = f"[{hostname}]" if ":" in hostname else hostname
    default = {"http": 80, "https": 443}.get(scheme)
    return f"{scheme}://{host}" + (f":{port}" if port is not None and port != default else "")


def parse_origin(text: str) -> str:
    """`text` (scheme://host[:port], http or https) as browsers send an
    Origin; ValueError saying what is wrong."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        parts, port = None, None
    if (parts is None or parts.scheme not in ("http", "https") or not parts.hostname or parts.username
            or parts.path not in ("", "/") or parts.query or parts.fragment):
        raise ValueError(f"'{text}' is not an origin such as http://robot-pc.local:8080 (scheme, host, port)")
    return _origin(parts.scheme, parts.hostname, port)


class Admission:
    """Which requests the view's server takes (module docstring): the Host
    header names this view (a localhost name; the address served, or with
    0.0.0.0 or :: any IP address and this machine's name; the host of one of
    `allowed_origins`), so that no other site's name resolved to this machine
    (DNS rebinding) gets the page; a websocket's Origin, when sent (browsers
    always send it), is the page's own (http://<Host>) or one of
    `allowed_origins`; a websocket speaks the page's viser protocol, and is
    taken only once the scene is ready; at most MAX_CONNECTIONS websockets
    are open.
    Each refusal is told to refuse(reason, text)."""

    def __init__(self, host: str, allowed_origins: Sequence[str], refuse: Callable[[str, str], None]):
        import viser

        self.origins = frozenset(parse_origin(origin) for origin in allowed_origins)
        self.names = LOCAL_NAMES | {urlsplit(origin).hostname for origin in self.origins}
        self.every_interface = host in EVERY_INTERFACE
        if self.every_interface:
            self.names |= {socket.gethostname().lower()}
        else:
            self.names |= {host.lower()}
        self.protocol = f"viser-v{viser.__version__}"
        self.refuse = refuse
        self.ready = False  # websockets are taken once the scene is built

    def _host_admitted(self, name: str) -> bool:
        return name in self.names or (self.every_interface and _is_address(name))

    def check(self, connection, request):
        """None to serve `request`, else the refusal (websockets' process_request)."""
        hosts = request.headers.get_all("Host")
        try:
            parts = urlsplit(f"//{hosts[0]}") if len(hosts) == 1 else None
            hostname, port = (parts.hostname, parts.port) if parts else (None, None)
        except ValueError:  # a port that is no number
            hostname, port = None, None
        if not hostname or not self._host_admitted(hostname):
            self.refuse("host", f"a request for Host '{hosts[0][:100]}', not an address of this view "
                                "(allowed_origins admits others)" if len(hosts) == 1 else
                                f"a request with {len(hosts)} Host headers")
            return connection.respond(http.HTTPStatus.FORBIDDEN, "This view is not served under that name.\n")
        if request.headers.get("Upgrade", "").lower() != "websocket":
            return None  # the page and its files: viser's (each answered, then closed)
        origins = request.headers.get_all("Origin")
        try:
            origin = parse_origin(origins[0]) if len(origins) == 1 else None
        except ValueError:
            origin = None
        if origins and origin != _origin("http", hostname, port) and origin not in self.origins:
            self.refuse("origin", f"a websocket from the page of '{origins[0][:100]}', another site's "
                                  "(allowed_origins admits others)")
            return connection.respond(http.HTTPStatus.FORBIDDEN, "This view serves its own page only.\n")
        offered = {p.strip() for value in request.headers.get_all("Sec-WebSocket-Protocol") for p in value.split(",")}
        if self.protocol not in offered:
            self.refuse("protocol", f"a websocket that does not speak {self.protocol} (a page of another "
                                    "viser version: reload it)")
            return connection.respond(http.HTTPStatus.BAD_REQUEST, f"This view speaks {self.protocol}.\n")
        if len(connection.server.connections) >= MAX_CONNECTIONS:
            self.refuse("connections", f"a websocket beyond the {MAX_CONNECTIONS} open ones")
            return connection.respond(http.HTTPStatus.SERVICE_UNAVAILABLE, "Too many connections.\n")
        if not self.ready:  # the browser tries again
            return connection.respond(http.HTTPStatus.SERVICE_UNAVAILABLE, "The view is starting.\n")
        return None


class ConnectionLog(logging.Handler):
    """What the websockets server logs at WARNING and above (a connection
    closed on a malformed message, with its traceback), as one refusal each;
    not a connection closed before its request was complete (a browser's
    preconnect, or anything not HTTP: aborted, as viser's own filter has it
    once a page was served)."""

    def __init__(self, refuse: Callable[[str, str], None]):
        super().__init__(logging.WARNING)
        self.refuse = refuse

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == "opening handshake failed":
            return
        error = record.exc_info[1] if record.exc_info else None
        why = "" if error is None else f" ({type(error).__name__}{f': {str(error)[:200]}' if str(error) else ''})"
        if record.getMessage() == "connection handler failed":  # viser's reading of a message raised
            self.refuse("message", f"closed a browser connection on a malformed message{why}")
        else:
            self.refuse("message", f"a browser connection: {record.getMessage()}{why}")


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket listening on `host` (an IP address of this machine, or
    localhost) at `port`, else the next free port of PORT_TRIES (0: any);
    ValueError saying why not, without waiting for a name lookup."""
    if host == "":
        raise ValueError("host '' would serve on every interface: give 0.0.0.0 for that, or 127.0.0.1 "
                         "(this machine only)")
    address = "127.0.0.1" if host == "localhost" else host
    if not _is_address(address):
        raise ValueError(f"host '{host}' is not an IP address: give one of this machine's addresses "
                         "(127.0.0.1: this machine only; 0.0.0.0: every interface)")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    ports = [0] if port == 0 else list(range(port, min(port + PORT_TRIES, 65536)))
    for candidate in ports:
        try:
            return socket.create_server((address, candidate), family=family)
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                why = os.strerror(error.errno) if error.errno else str(error)
                raise ValueError(f"cannot serve on host {host} port {candidate}: {why}") from None
    raise ValueError(f"cannot serve on host {host}: ports {ports[0]} to {ports[-1]} are all taken")


def quiet_browser_warnings() -> None:
    """No line on stderr for each field of the wrong type in a browser's
    message (viser warns of each; the message is refused all the same)."""
    warnings.filterwarnings("ignore", r"\[viser\] .* does not match annotation", UserWarning)


# The serve options of the Viewer whose ViserServer is starting (one at a time).
_starting = threading.Lock()
_start_options: dict = {}


def _serve(original):
    """websockets' serve as viser calls it (viser 1.1.1 has no option for
    its server), with the options of the Viewer starting: its listening
    socket, Admission before viser's page server, the message size and queue
    limits and a log of its own. A viser server starting when no Viewer is
    binds nothing."""
    def serve(handler, host=None, port=None, **options):
        if not getattr(handler, "__module__", "").startswith("viser."):
            return original(handler, host, port, **options)
        if not _start_options:
            raise OSError("no mbs_dynamics Viewer is starting")
        admission, logger, sock = _start_options.pop("admission"), _start_options.pop("logger"), \
            _start_options.pop("socket")
        page = options.pop("process_request")
        options.update(max_size=MAX_MESSAGE_BYTES, max_queue=MAX_QUEUED_MESSAGES, logger=logger,
                       process_request=lambda connection, request: admission.check(connection, request) or (
                           page(connection, request) if page is not None else None))
        started = original(handler, None, None, sock=sock, **options)
        _start_options["server"] = started.server
        return started

    serve.wraps = original
    return serve


def start_viser(sock: socket.socket, admission: Admission, logger: logging.Logger, host: str, label: str):
    """A ViserServer on `sock` with `admission` (see _serve), and its
    websockets server."""
    import viser
    import websockets.asyncio.server

    with _starting:
        if not hasattr(websockets.asyncio.server.serve, "wraps"):
            websockets.asyncio.server.serve = _serve(websockets.asyncio.server.serve)
        _start_options.clear()
        _start_options.update(admission=admission, logger=logger, socket=sock)
        try:
            server = viser.ViserServer(host=host, port=sock.getsockname()[1], label=label, verbose=False)
            return server, _start_options.pop("server")
        finally:
            _start_options.clear()
