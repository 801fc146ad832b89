#!/usr/bin/env bash
# Makes a new API key for `holdfast http` (docs/HTTP.md, API keys): a random
# secret for the calling service, and the keys-file line that holds only its
# SHA-256. The secret is printed once, here; holdfast cannot show it again.
#
# usage: bash tools/api-key.sh ID SCOPES [RATE_PER_S [BURST]]
#   e.g. bash tools/api-key.sh checkout-web reserve,commit,release,read 200 400 >>keys.txt
# stdout: the keys-file line (append it to http_api_keys_file, then SIGHUP the fronts)
# stderr: the secret (give it to the service: Authorization: Bearer <secret>)
set -euo pipefail
if [ $# -lt 2 ] || [ $# -gt 4 ]; then
  sed -n '6,9p' "$0" >&2
  exit 2
fi
id=$1 scopes=$2 rate=${3:--} burst=${4:--}
[[ $id =~ ^[A-Za-z0-9._-]{1,64}$ ]] || { echo "api-key: ID '$id' must be 1..64 of A-Z a-z 0-9 . _ -" >&2; exit 2; }
[[ $scopes =~ ^(reserve|commit|release|read)(,(reserve|commit|release|read))*$ ]] ||
  { echo "api-key: SCOPES '$scopes' must be a comma list of reserve, commit, release, read" >&2; exit 2; }
# 32 random bytes, URL-safe base64 without padding: 43 characters of the Bearer alphabet.
secret=hf_$(openssl rand -base64 32 | tr '+/' '-_' | tr -d '=\n')
hash=$(printf %s "$secret" | openssl dgst -sha256 -r | cut -d' ' -f1)
echo "secret for $id (shown once): $secret" >&2
printf '%s %s %s %s %s\n' "$id" "$hash" "$scopes" "$rate" "$burst"
