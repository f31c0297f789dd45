"""daphne with compressed websockets: `python -m taskos.ops.web` takes daphne's arguments.

The drawer streams HTML fragments that repeat the same tags, classes and ids frame after
frame; deflated with the context kept between messages (RFC 7692, permessage-deflate)
they shrink several times over. Chromium, Firefox and Safari offer the extension on every
websocket, but daphne leaves autobahn's default in place, which declines every offer, so
the run command and the browser tests' stack start daphne through this module instead.
"""
from __future__ import annotations

import logging
import threading

from autobahn.websocket.compress import PerMessageDeflateOffer, PerMessageDeflateOfferAccept
from daphne.cli import CommandLineInterface
from daphne.server import Server

log = logging.getLogger(__name__)


def warm_up() -> None:
    """Load the model profiles' token encodings, which a session page's inspector and
    budget count with: loaded by the first page that needed one, they were ~100 ms of
    the first finished long-1000 page after a start (206 -> 109 ms with them loaded)."""
    from django.db import DatabaseError, connection

    from agents import TokenCounter
    from taskos.runs.models import ModelProfile

    try:
        for model, encoding in ModelProfile.objects.values_list("model", "encoding").distinct():
            TokenCounter(model, encoding)  # tiktoken keeps each encoding it loaded
    except DatabaseError:  # not migrated yet: the first page loads what it needs
        log.warning("could not read the model profiles to load their token encodings")
    finally:
        connection.close()


def accept_deflate(offers: list) -> PerMessageDeflateOfferAccept | None:
    """The browser's first permessage-deflate offer, accepted as offered."""
    for offer in offers:
        if isinstance(offer, PerMessageDeflateOffer):
            return PerMessageDeflateOfferAccept(offer)
    return None


class CompressingServer(Server):
    """daphne's server whose websocket factory accepts permessage-deflate.

    `Server.run` builds the factory and sets its options in one method; the factory is
    given the extra option as it is assigned, before any connection is made (autobahn
    copies a factory's options onto each connection when it opens)."""

    def run(self) -> None:
        # Beside the reactor, which serves requests meanwhile.
        threading.Thread(target=warm_up, name="warm-up", daemon=True).start()
        super().run()

    @property
    def ws_factory(self):
        return self._ws_factory

    @ws_factory.setter
    def ws_factory(self, factory) -> None:
        factory.setProtocolOptions(perMessageCompressionAccept=accept_deflate)
        self._ws_factory = factory


class CommandLine(CommandLineInterface):
    server_class = CompressingServer


if __name__ == "__main__":
    CommandLine.entrypoint()
