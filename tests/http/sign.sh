#!/usr/bin/env bash
# Signs a payment-webhook body the way a provider does (processor/http/webhook_sig.h),
# with openssl rather than holdfast's own signer, so a test of the server does not
# trust the code under test: prints the Holdfast-Signature header value
#     t=<T>,v1=<hex HMAC-SHA256(SECRET, "<T>.<BODY>")>
#
# usage: tests/http/sign.sh SECRET BODY [T]   (T: unix seconds, default now)
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 SECRET BODY [T]" >&2; exit 2; }
secret=$1 body=$2 t=${3:-$(date +%s)}
mac=$(printf '%s' "$t.$body" | openssl dgst -sha256 -hmac "$secret" | awk '{print $NF}')
printf 't=%s,v1=%s\n' "$t" "$mac"
