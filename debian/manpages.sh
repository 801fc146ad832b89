#!/usr/bin/env bash
# Man pages for holdfast, hfctl and hfbench, made from their own --help and --version,
# so a page never says what the binary does not: the top-level help as DESCRIPTION,
# every subcommand's --help (holdfast run / http, each hfctl COMMAND, hfbench seed /
# run) under COMMANDS, then the files the package installs. The help texts are laid
# out for a terminal already, so they stay preformatted. Dated from SOURCE_DATE_EPOCH
# (dpkg-buildpackage sets it from debian/changelog), so a rebuild gives the same pages.
#
# usage: debian/manpages.sh BUILD_DIR OUT_DIR   (debian/rules, after make release)
set -euo pipefail
build=$1 out=$2
mkdir -p "$out"
date=$(date -u -d "@${SOURCE_DATE_EPOCH:-$(date +%s)}" +%Y-%m-%d)

# Plain text as a preformatted roff block: backslashes escaped, a line opening with
# a control character made literal, hyphens as hyphens.
roff_block() {
  echo '.nf'
  sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"
  echo '.fi'
}

# page PROG "WHAT" CMD...: the page of PROG, with `PROG CMD --help` for each CMD.
page() {
  local prog=$1 what=$2 cmd version
  shift 2
  version=$("$build/$prog" --version | head -n 1 | awk '{print $NF}')
  echo ".TH ${prog^^} 1 \"$date\" \"holdfast $version\" \"User Commands\""
  echo '.SH NAME'
  echo "$prog \\- $what"
  echo '.SH SYNOPSIS'
  "$build/$prog" --help | sed -n '/^usage:/,/^[^ u]/p' | sed '$d' | sed 's/^usage: //; s/^       //' |
    roff_block
  echo '.SH DESCRIPTION'
  "$build/$prog" --help | roff_block
  echo '.SH COMMANDS'
  for cmd in "$@"; do
    echo ".SS \"$prog $cmd\""
    # shellcheck disable=SC2086 # cmd may be two words ("stock feed")
    "$build/$prog" $cmd --help | roff_block
  done
  echo '.SH VERSION'
  "$build/$prog" --version | roff_block
  cat <<'ROFF'
.SH FILES
.TP
.I /etc/holdfast/topics.json
The topic set (\fBhfctl topics apply\fR).
.TP
.I /etc/holdfast/warehouses.json
The warehouse network (the gateway's \fBwarehouses_file\fR, \fBhfbench seed\fR).
.PP
A data file that no option or setting names is looked for first relative to the working
directory (\fItopics/topics.json\fR, \fIconfig/warehouses.json\fR: a source checkout),
then in \fI/etc/holdfast\fR (\fBHOLDFAST_SYSCONFDIR\fR replaces that directory).
.TP
.I /etc/holdfast/run\-NAME.json, /etc/holdfast/http.json
Settings of \fBholdfast\-run@NAME.service\fR and \fBholdfast\-http.service\fR.
.TP
.I /etc/holdfast/holdfast.env, /etc/holdfast/secrets.env
Environment of both units; secrets (webhook secrets, Kafka passwords) go in the
second, readable by root and the holdfast group only.
.TP
.I /var/lib/holdfast
State of the units (RocksDB, one directory per stage and instance).
.TP
.I /usr/share/doc/holdfast/
README.Debian (running the units), README.md, and the settings (CONFIGURATION.md),
HTTP, security and reliability documents.
.SH SEE ALSO
ROFF
  local others=() p
  for p in holdfast hfctl hfbench; do [ "$p" = "$prog" ] || others+=("$p"); done
  echo ".BR ${others[0]} (1),"
  echo ".BR ${others[1]} (1)"
}

mapfile -t hfctl_cmds < <("$build/hfctl" --help | sed -n '/^commands:/,/^[^ c]/p' |
  sed -n 's/^  \([a-z-]*\( [a-z-]*\)\?\)  .*/\1/p')
[ ${#hfctl_cmds[@]} -ge 10 ] || {
  echo "manpages: hfctl --help lists ${#hfctl_cmds[@]} commands; expected its command list" >&2
  exit 1
}

page holdfast "inventory reservation engine: Kafka stream processor and HTTP front" run http \
  >"$out/holdfast.1"
page hfctl "operator tool for holdfast: topics, stock, reservations, reconcile" \
  "${hfctl_cmds[@]}" >"$out/hfctl.1"
page hfbench "flash-sale load generator for holdfast" seed run >"$out/hfbench.1"
