"""Schemathesis hooks for tests/http/test_contract.sh: what the document cannot say.

A reserve names SKUs, and only stocked SKUs can be held: an unknown one is the
pipeline's 422 rejected_invalid, which no schema can foresee. So every line whose
SKU the document calls valid is given one of the SKUs the test seeded (SKU-00000..,
HOLDFAST_CONTRACT_SKUS of them), line i the i-th: distinct, as the server wants
(a SKU in two lines is 422, which JSON Schema cannot say either). An availability
read of a valid SKU reads a seeded one. Lines and SKUs that are invalid on purpose
(negative cases) are left as generated, so the server still has to refuse them.
Likewise a valid only_warehouses entry names a warehouse of config/warehouses.json
(the pipeline's), entry i the i-th: an unknown id is the gateway's 422.
Schemathesis re-validates a case a before_call hook changed, so a case stays
positive or negative as its final request is.

In the stateful phase each reserve gets a reservation_id of its own (a valid one
gains a "~<n>" suffix): a reserve under an id already used is answered with that
id's first answer (idempotency), so the links would lead to a reservation long
committed or released, and the sequences would test little but 409s. The other
phases keep the ids as generated, retries and conflicts included.

A payment webhook is signed as a provider signs it (HOLDFAST_CONTRACT_WEBHOOK_SECRET,
docs/HTTP.md), so that the event's handling is tested, not only the signature
check. It is a Schemathesis auth provider, so that the ignored_auth check still
probes the route without a signature and with a wrong one, and expects 401.
"""

import hashlib
import hmac
import itertools
import json
import os
import re
import time

import schemathesis

SKUS = [f"SKU-{i:05d}" for i in range(int(os.environ.get("HOLDFAST_CONTRACT_SKUS", "40")))]
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "config",
                       "warehouses.json")) as f:
    WAREHOUSES = [w["id"] for w in json.load(f)["warehouses"] if w.get("kind") != "store"]
WAREHOUSE_ID = re.compile(r"^[ -{}~]{1,32}$")
# docs/openapi.json: Text64 (a line's sku) and the availability path's sku.
RESERVATION_ID = re.compile(r'^(?!\.\.?$)[!"$&-.0->@-{}~]{1,64}$')
FRESH = itertools.count(1)
LINE_SKU = re.compile(r"^[ -{}~]{1,64}$")
PATH_SKU = re.compile(r"^(?!\.\.?$)[ -.0-{}~]{1,64}$")


SECRET = os.environ.get("HOLDFAST_CONTRACT_WEBHOOK_SECRET", "")


@schemathesis.auth(refresh_interval=None).apply_to(path="/v1/webhooks/payments")
class WebhookSignature:
    """Holdfast-Signature over the body as it is sent (requests' json.dumps)."""

    def get(self, case, context):
        return SECRET or None

    def set(self, case, secret, context):
        try:
            raw = json.dumps(case.body, allow_nan=False).encode()
        except (TypeError, ValueError):
            return  # no JSON body: sent unsigned, refused 401 before it is read
        t = int(time.time())
        mac = hmac.new(secret.encode(), f"{t}.".encode() + raw, hashlib.sha256).hexdigest()
        if case.headers is None:
            case.headers = {}
        case.headers["Holdfast-Signature"] = f"t={t},v1={mac}"


def in_phase(case, name):
    return case.meta is not None and case.meta.phase.name == name  # a StrEnum


def operation_id(case):
    return case.operation.definition.raw.get("operationId")


@schemathesis.hook
def before_call(context, case, kwargs):
    op = operation_id(case)
    if op == "reserve" and isinstance(case.body, dict) and in_phase(case, "stateful"):
        rid = case.body.get("reservation_id")
        if isinstance(rid, str) and RESERVATION_ID.match(rid):
            suffix = f"~{next(FRESH)}"
            case.body["reservation_id"] = rid[: 64 - len(suffix)] + suffix
    if op == "reserve" and isinstance(case.body, dict) and isinstance(case.body.get("lines"), list):
        for i, line in enumerate(case.body["lines"]):
            if isinstance(line, dict) and isinstance(line.get("sku"), str) and LINE_SKU.match(line["sku"]):
                line["sku"] = SKUS[i % len(SKUS)]
        only = case.body.get("only_warehouses")
        if isinstance(only, list):
            for i, w in enumerate(only):
                if isinstance(w, str) and WAREHOUSE_ID.match(w):
                    only[i] = WAREHOUSES[i % len(WAREHOUSES)]
    elif op == "getAvailability":
        sku = (case.path_parameters or {}).get("sku")
        if isinstance(sku, str) and PATH_SKU.match(sku):
            case.path_parameters["sku"] = SKUS[sum(map(ord, sku)) % len(SKUS)]
