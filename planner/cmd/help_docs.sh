#!/bin/sh
# help_docs.sh ROAMC MAN_OUT COMPLETION_OUT
#
# Writes roamc's man page (groff man, roamc.1) and its bash completion from
# the help texts the built ROAMC prints (roamc --help, roamc check|shapes|
# layout|explain --help), so that neither can list an option --help does not
# or miss one it does: the build runs this after linking roamc
# (planner/cmd/CMakeLists.txt), `cmake --install` installs both, ctest
# test_install checks them.
#
# How the help text reads (main.c, layout_cmd.c, explain.c), which this relies on:
#   - it starts with "usage: roamc ..." and more usage lines indented with 7 or
#     more spaces;
#   - paragraphs are separated by blank lines;
#   - in roamc --help, "options:" opens the option list: an entry starts with
#     2 to 6 spaces and "-", its description at column 25 (or after two spaces
#     when the option is longer), continuation lines start with 8 or more
#     spaces; after the list, a paragraph "LABEL: text" is a section LABEL;
#   - in a command's help, "  TERM: text" lines (continued with 8 or more
#     spaces) are entries.
# The values the completion offers (--order roam|program|...) are listed
# below by hand (_roamc_values_*); everything else comes from the help texts.
set -eu
[ $# = 3 ] || {
    echo "usage: $0 ROAMC MAN_OUT COMPLETION_OUT" >&2
    exit 2
}
roamc=$1 man_out=$2 comp_out=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$roamc" --help >"$tmp/plan"
for c in check shapes layout explain; do "$roamc" $c --help >"$tmp/$c"; done
version=$("$roamc" --version | sed -n '1s/^roamc //p')
[ -n "$version" ] || {
    echo "$0: $roamc --version printed no version" >&2
    exit 1
}

# ---------------------------------------------------------------- the man page
# man_of MODE FILE: FILE (a help text) as groff man; MODE main (roamc --help:
# SYNOPSIS, DESCRIPTION, OPTIONS, a section per labelled paragraph) or
# command (one subsection's body).
man_of() {
    awk -v mode="$1" '
    # groff: a backslash is \e, every "-" the ASCII minus \-, a line may not start with . or '"'"'
    function esc(s) {
        gsub(/\\/, "\\e", s)
        gsub(/-/, "\\-", s)
        if (s ~ /^[.'"'"']/) s = "\\&" s
        return s
    }
    function trim(s) { sub(/^ +/, "", s); sub(/ +$/, "", s); return s }
    # an option spec as "\fB--name\fR \fIVALUE\fR": bold the words that start with -
    function spec(s,    n, w, i, out, sep) {
        n = split(s, w, / +/)
        out = ""
        for (i = 1; i <= n; i++) {
            sep = (i > 1) ? " " : ""
            if (w[i] ~ /^-/) {
                if (match(w[i], /[[=]/) && w[i] !~ /^-[a-zA-Z],$/)
                    out = out sep "\\fB" esc(substr(w[i], 1, RSTART - 1)) "\\fR\\fI" esc(substr(w[i], RSTART)) "\\fR"
                else
                    out = out sep "\\fB" esc(w[i]) "\\fR"
            } else
                out = out sep "\\fI" esc(w[i]) "\\fR"
        }
        return out
    }
    function flush_entry() {
        if (term != "") { print ".TP"; print term; print esc(desc) }
        term = ""; desc = ""
    }
    function para_start() { if (!in_para) { print ".PP"; in_para = 1 } }
    BEGIN { state = "usage"; in_para = 0 }
    state == "usage" {
        if ($0 ~ /^usage: /) {
            if (mode == "main") print ".SH SYNOPSIS"
            print ".nf"; print esc(substr($0, 8)); next
        }
        if ($0 ~ /^       [ ]*[^ ]/) { print esc(trim($0)); next }
        print ".fi"
        state = "text"
        if (mode == "main") print ".SH DESCRIPTION"
    }
    /^$/ { flush_entry(); in_para = 0; if (state == "options") state = "text"; next }
    mode == "main" && $0 == "options:" { print ".SH OPTIONS"; state = "options"; next }
    state == "options" && /^  [ ]?[ ]?[ ]?[ ]?-/ {
        flush_entry()
        if (length($0) > 24 && substr($0, 23, 2) ~ /^[^ ] $/ && substr($0, 25, 1) != " ")
            { t = substr($0, 1, 23); d = substr($0, 25) }
        else if (match($0, /[^ ]  +[^ ]/))
            { t = substr($0, 1, RSTART); d = substr($0, RSTART + RLENGTH - 1) }
        else { t = $0; d = "" }
        term = spec(trim(t)); desc = trim(d); next
    }
    /^        .*[^ ]/ && term != "" { desc = desc " " trim($0); next }
    mode == "command" && /^  [ ]?[ ]?[ ]?[ ]?[^ ]/ && match($0, /: /) {
        flush_entry()
        t = trim(substr($0, 1, RSTART - 1))
        desc = trim(substr($0, RSTART + 2))
        term = (t ~ /^-/) ? spec(t) : "\\fI" esc(t) "\\fR"
        next
    }
    {
        flush_entry()
        if (mode == "main" && !in_para && match($0, /^[a-z][a-z ]*: /)) {
            print ".SH " toupper(substr($0, 1, RLENGTH - 2))
            in_para = 1
            print esc(substr($0, RLENGTH + 1)); next
        }
        para_start(); print esc(trim($0))
    }
    END { flush_entry(); if (state == "usage") print ".fi" }
    ' "$2"
}

{
    echo '.\" roamc.1: made by planner/cmd/help_docs.sh from roamc --help and each'
    echo ".\\\" command's --help; edit those texts, not this file."
    echo ".TH ROAMC 1 \"\" \"roamc $version\" \"User Commands\""
    echo '.SH NAME'
    echo 'roamc \- plan the memory of a training step or inference pass of an ONNX model'
    man_of main "$tmp/plan"
    echo '.SH COMMANDS'
    for c in check shapes layout explain; do
        echo ".SS \"roamc $c\""
        man_of command "$tmp/$c"
    done
    echo '.SH SEE ALSO'
    echo 'The README and planner/PLAN_FORMAT.md of the roamc sources; the plan'
    echo "file's JSON Schema, share/roamc/plan.schema.json."
} >"$tmp/roamc.1"

# --------------------------------------------------------- the bash completion
# opts FILE: the options FILE offers: in roamc --help the option list's specs;
# in a command's help those in its usage lines and its entries' terms
# ("  --work UNITS: ..."), not those its prose mentions
opts() {
    if [ "$(basename "$1")" = plan ]; then
        sed -n '/^options:$/,/^$/p' "$1" | grep -E '^ {2,6}-'
    else
        awk 'NR == 1 || (u && /^        /) { u = 1; print; next } { u = 0 }
             /^  [ ]?[ ]?[ ]?[ ]?-[^:]*: / { sub(/: .*/, ""); print }' "$1"
    fi | grep -oE -- '(^|[ ,[])-(-[a-z][a-z0-9-]*[a-z0-9]|[a-zA-Z])([] ,=[]|$)' |
        sed -E 's/^[ ,[]//; s/[] ,=[]$//' | { cat; printf '%s\n' -h --help; } | sort -u | tr '\n' ' ' | sed 's/ $//'
}
# valued FILE: the options of FILE that take a value ("--order NAME",
# "[--top N]", "-o OUT.csv", "--capacity: ... SIZE")
valued() {
    if [ "$(basename "$1")" = plan ]; then
        sed -n '/^options:$/,/^$/p' "$1" | grep -oE -- '-(-[a-z][a-z0-9-]*|[a-zA-Z]) [A-Z][A-Z0-9_.,=]*' | cut -d' ' -f1
    else
        grep -oE -- '-(-[a-z][a-z0-9-]*|[a-zA-Z]) ([A-Z]|[a-z]+\|)' "$1" | cut -d' ' -f1
    fi | sort -u | tr '\n' ' ' | sed 's/ $//'
}
for c in plan check shapes layout explain; do
    o=$(opts "$tmp/$c")
    [ -n "$o" ] || {
        echo "$0: found no options in roamc $c's help" >&2
        exit 1
    }
    printf '%s\n' "$o" >"$tmp/$c.opts"
    valued "$tmp/$c" >"$tmp/$c.valued"
    echo >>"$tmp/$c.valued"
done

{
    cat <<EOF
# bash completion for roamc $version: made by planner/cmd/help_docs.sh from
# roamc --help and each command's --help; edit those texts, not this file.
_roamc_opts_plan='$(cat "$tmp/plan.opts")'
_roamc_opts_check='$(cat "$tmp/check.opts")'
_roamc_opts_shapes='$(cat "$tmp/shapes.opts")'
_roamc_opts_layout='$(cat "$tmp/layout.opts")'
_roamc_opts_explain='$(cat "$tmp/explain.opts")'
_roamc_valued='$(cat "$tmp"/*.valued | tr ' ' '\n' | sort -u | tr '\n' ' ' | sed 's/ $//')'
EOF
    cat <<'EOF'

# The values an option takes (by hand: keep them to what roamc --help says;
# ctest test_install runs roamc with each). --fit's only as --fit=HOW.
_roamc_values_order='roam program lescea ilp'
_roamc_values_layout='roam llfb greedy bestfit pytorch ilp'
_roamc_values_method='pytorch heuristics ilp roam'
_roamc_values_report='text json'
_roamc_values_loss='cross-entropy mse none'
_roamc_values_optimizer='adam adamw sgd momentum none'
_roamc_values_precision='fp32 bf16 fp16 amp-bf16 amp-fp16'
_roamc_values_shard='ddp zero1 zero2 zero3 fsdp'
_roamc_values_fit='recompute offload both'
_roamc_values_device='h100 a100 l4 4090 gh200'
_roamc_values_layout_method='roam llfb greedy bestfit pytorch'
_roamc_values_layout_engine='skyline bnb sweep both'

# _roamc_files EXT: files ending in .EXT, and folders
_roamc_files() {
    local IFS=$'\n'
    compopt -o filenames 2>/dev/null
    COMPREPLY=($(compgen -d -- "$cur") $(compgen -f -X "!*.$1" -- "$cur"))
}

_roamc() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
    local cmd=plan first=1 i w n=0
    COMPREPLY=()
    case ${COMP_WORDS[1]} in
    check | shapes | layout | explain | help) ((COMP_CWORD > 1)) && cmd=${COMP_WORDS[1]} first=2 ;;
    esac
    # --name=VALUE: bash splits the words at '=' (COMP_WORDBREAKS): "--fit" "=" "VALUE"
    local eq=0
    if [[ $cur == = ]]; then
        cur= eq=1
    elif [[ $prev == = ]]; then
        prev=${COMP_WORDS[COMP_CWORD - 2]} eq=1
    fi
    case $prev in
    -o | --output | --emit-train | --dump-tree | --dump-buffers | --svg | --device-profile)
        compopt -o filenames 2>/dev/null
        COMPREPLY=($(compgen -f -- "$cur"))
        return ;;
    esac
    # an option's values: _roamc_values_OPTION, _roamc_values_layout_OPTION for roamc layout
    if [[ $prev =~ ^--[a-z][a-z-]*$ ]] && { [[ $prev != --fit ]] || ((eq)); }; then
        local v=${prev#--}
        v=${v//-/_}
        [[ $cmd == layout ]] && v=layout_$v
        v=_roamc_values_$v
        if [[ -n ${!v-} ]]; then
            COMPREPLY=($(compgen -W "${!v}" -- "$cur"))
            return
        fi
    fi
    if ((eq)) || [[ " $_roamc_valued " == *" $prev "* ]]; then
        return # a value (a size, a name, a pattern): nothing to offer
    fi
    if [[ $cur == -* ]]; then
        local v=_roamc_opts_$cmd
        COMPREPLY=($(compgen -W "${!v}" -- "$cur"))
        return
    fi
    # positional: count the words before cur that are not options or their values
    for ((i = first; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        if [[ $w == -* || $w == = ]]; then
            continue
        elif [[ ${COMP_WORDS[i - 1]} == = || " $_roamc_valued " == *" ${COMP_WORDS[i - 1]} "* ]]; then
            continue
        fi
        n=$((n + 1))
    done
    case $cmd:$n in
    plan:0)
        _roamc_files onnx
        ((COMP_CWORD == 1)) && COMPREPLY+=($(compgen -W 'check shapes layout explain help' -- "$cur")) ;;
    check:0 | shapes:0 | explain:1) _roamc_files onnx ;;
    check:1 | explain:0) _roamc_files json ;;
    layout:0) _roamc_files csv ;;
    help:0) COMPREPLY=($(compgen -W 'plan check shapes layout explain' -- "$cur")) ;;
    esac
}
complete -F _roamc roamc
EOF
} >"$tmp/roamc.bash"

mv "$tmp/roamc.1" "$man_out"
mv "$tmp/roamc.bash" "$comp_out"
