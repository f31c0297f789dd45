"""daphne with compressed websockets: `python -m taskos.ops.web` takes daphne's arguments.

The drawer streams HTML fragments that repeat the same tags, classes and ids frame after
frame; deflated with the context kept between messages (RFC 7692, permessage-deflate)
they shrink several times over. Chromium, Firefox and Safari offer the extension on every
websocket, but daphne leaves autobahn's default in place, which declines every offer, so
the run command and the browser tests' stack start daphne through this module instead.
"""
from __future__ import annotations

from autobahn.websocket.compress import PerMessageDeflateOffer, PerMessageDeflateOfferAccept
from daphne.cli import CommandLineInterface
from daphne.server import Server


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
