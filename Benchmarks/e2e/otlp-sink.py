#!/usr/bin/env python3
"""An OTLP/HTTP receiver that takes every export and keeps nothing but a count (benchmarks with
TRACES=1: what exporting traces costs the broker, not what a collector does with them).
Usage: otlp-sink.py PORT COUNT_FILE"""
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

exports = 0


class Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        global exports
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        exports += 1
        with open(sys.argv[2], "w") as f:
            f.write(f"{exports}\n")
        body = b""
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
