#!/usr/bin/env python3
"""Fails when a function in the C++ sources under a folder is longer than a limit (docs/design.md,
"Function length"): lines from the line of the function's name to its closing brace, as lizard counts
them. Self-contained (the standard library only), so that the CPU tier checks the rule on any machine.

    check_function_length.py [--max-lines 80] [--list N] FOLDER...

Reads every .cpp, .hpp, .h and .inc file under each FOLDER. Prints each function over the limit as
"path:line: name has N lines (limit L)" and exits 1; exits 0 when there is none; exits 2 for a file
whose braces it cannot follow (it says which), so that a source it misreads fails loudly instead of
passing unread. --list N also prints the N longest functions (for reports).

How it reads C++: comments, string and character literals (raw strings included) and preprocessor
lines are blanked first, keeping the line breaks. Then, at namespace and class scope, an opening brace
opens a function body when the declaration before it has a parameter list at its top level and no
'=' (an initializer, a lambda assigned to a variable); namespaces, extern blocks, classes, structs and
unions are scopes that are entered; every other brace (enums, initializers, the braces of a
constructor's member initializers) is skipped whole. Everything inside a function body, lambdas and
local classes included, counts toward that function.
"""
import argparse
import os
import re
import sys

SUFFIXES = (".cpp", ".hpp", ".h", ".inc", ".cc")
IDENT = re.compile(r"[A-Za-z0-9_]")


def _blank(text):
    """text with every character but the line breaks turned into a space."""
    return re.sub(r"[^\n]", " ", text)


def _raw_string_prefix_at(text, i):
    """Whether text[i] is the R of a raw string literal's prefix (R, u8R, uR, UR, LR) followed by '"'."""
    if text[i] != "R" or i + 1 >= len(text) or text[i + 1] != '"':
        return False
    start = i
    while start > 0 and IDENT.match(text[start - 1]):
        start -= 1
    return text[start:i + 1] in ("R", "u8R", "uR", "UR", "LR")


def _is_digit_separator(text, i):
    """Whether the quote at text[i] separates digits of a number (1'000'000) rather than opening a literal."""
    if i == 0 or not IDENT.match(text[i - 1]):
        return False
    start = i - 1
    while start > 0 and (IDENT.match(text[start - 1]) or text[start - 1] in "'."):
        start -= 1
    return text[start].isdigit()


def strip_code(text):
    """text with comments, literals and preprocessor lines blanked; the length and line breaks kept."""
    out = []
    i = 0
    n = len(text)
    line_start = True  # only blanks since the last line break
    while i < n:
        c = text[i]
        if c == "\n":
            out.append(c)
            i += 1
            line_start = True
            continue
        if line_start and c == "#":
            j = i
            while j < n and text[j] != "\n":
                j += 2 if text[j] == "\\" and j + 1 < n else 1
            out.append(_blank(text[i:j]))
            i = j
            continue
        if not c.isspace():
            line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(_blank(text[i:j]))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(_blank(text[i:j]))
            i = j
        elif _raw_string_prefix_at(text, i):
            open_paren = text.find("(", i + 2)
            delimiter = text[i + 2:open_paren]
            j = text.find(")" + delimiter + '"', open_paren)
            j = n if j < 0 else j + len(delimiter) + 2
            out.append("R" + _blank(text[i + 1:j]))
            i = j
        elif c == '"' or (c == "'" and not _is_digit_separator(text, i)):
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(_blank(text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _neutralize_operators(head):
    """head with the symbols of operator names (operator(), operator==, operator<) turned into letters, same length."""
    head = re.sub(r"\boperator\s*\(\s*\)", lambda m: "operator" + "x" * (len(m.group(0)) - 8), head)
    return re.sub(r"\boperator\s*[^\sA-Za-z0-9_(]+", lambda m: "operator" + "x" * (len(m.group(0)) - 8), head)


def _top_level(head):
    """The characters of head outside parentheses, brackets and template angle brackets (others blanked,
    the brackets themselves kept), same length."""
    out = []
    depth = 0
    angle = 0
    for k, c in enumerate(head):
        if c in "([":
            out.append(c if depth == 0 and angle == 0 else " ")
            depth += 1
        elif c in ")]":
            depth = max(depth - 1, 0)
            out.append(c if depth == 0 and angle == 0 else " ")
        elif depth == 0 and c == "<" and k > 0 and re.match(r"[A-Za-z0-9_ ]", head[k - 1]) and \
                re.search(r"[A-Za-z0-9_]\s*$", head[:k]) and not head[:k].rstrip().endswith("operator"):
            out.append(c if angle == 0 else " ")
            angle += 1
        elif depth == 0 and c == ">" and angle > 0 and head[k - 1] != "-":
            angle -= 1
            out.append(c if angle == 0 else " ")
        else:
            out.append(c if depth == 0 and angle == 0 else " ")
    return "".join(out)


def _strip_prefixes(head):
    """head with leading template parameter lists and attributes blanked (same length)."""
    while True:
        m = re.match(r"\s*(\[\[|template\s*<)", head)
        if not m:
            return head
        close, opener = ("]]", "[[") if m.group(1) == "[[" else (">", "<")
        depth = 0
        k = m.end() - len(opener)
        while k < len(head):
            if head.startswith(opener, k):
                depth += 1
                k += len(opener)
                continue
            if head.startswith(close, k):
                depth -= 1
                k += len(close)
                if depth == 0:
                    break
                continue
            k += 1
        head = _blank(head[:k]) + head[k:]


def classify(head):
    """What an opening brace after the declaration text head opens: ("scope", name), ("function", (start,
    end) of the name in head), ("member-init", None) for the brace of a member initializer, or ("other",
    None)."""
    h = _strip_prefixes(head)
    stripped = h.strip()
    m = re.match(r"(?:inline\s+)?namespace\b\s*([\w:]*)", stripped)
    if m:
        return "scope", m.group(1)
    if re.match(r"extern\b", stripped) and "(" not in stripped:
        return "scope", ""
    top = _top_level(_neutralize_operators(h))
    if re.search(r"\benum\b", top):
        return "other", None
    if re.search(r"\b(class|struct|union)\b", top) and "(" not in top:
        words = [w for w in re.search(r"\b(?:class|struct|union)\b([\s\w]*)", top).group(1).split() if w != "final"]
        return "scope", words[-1] if words else ""
    if re.search(r"(?<![=!<>])=(?!=)", top):
        return "other", None
    paren = top.find("(")
    if paren < 0:
        return "other", None
    after = top[top.find(")", paren) + 1:]
    if re.search(r"(?<!:):(?!:)", after) and re.search(r"[A-Za-z0-9_>]\s*$", h):
        return "member-init", None
    name = re.search(r"[~\w:]+$", top[:paren].rstrip())  # the operators' symbols are letters in top
    return "function", (name.start(), name.end()) if name else (paren, paren)


def _match_brace(code, i):
    """The index of the brace closing the one at code[i], or -1."""
    depth = 0
    for k in range(i, len(code)):
        if code[k] == "{":
            depth += 1
        elif code[k] == "}":
            depth -= 1
            if depth == 0:
                return k
    return -1


def functions(text):
    """(name, first line, last line) of every function defined in the C++ text. Raises ValueError with
    the line of a brace it cannot follow."""
    code = strip_code(text)
    scopes = []  # names of the namespaces and classes the scan is in ("" for anonymous ones)
    found = []
    head_start = 0
    i = 0
    while i < len(code):
        c = code[i]
        if c == ";":
            head_start = i + 1
        elif c == "}":
            if not scopes:
                raise ValueError("line %d: a closing brace outside any scope" % (code.count("\n", 0, i) + 1))
            scopes.pop()
            head_start = i + 1
        elif c == "{":
            head = code[head_start:i]
            kind, what = classify(head)
            if kind == "scope":
                scopes.append(what)
                head_start = i + 1
            else:
                end = _match_brace(code, i)
                if end < 0:
                    raise ValueError("line %d: an opening brace that is never closed" % (code.count("\n", 0, i) + 1))
                if kind == "function":
                    name_at = head_start + what[0]
                    name = head[what[0]:what[1]] or "(unnamed)"
                    qualified = "::".join([s for s in scopes if s] + [name])
                    found.append((qualified, code.count("\n", 0, name_at) + 1, code.count("\n", 0, end) + 1))
                    head_start = end + 1
                i = end
        i += 1
    if scopes:
        raise ValueError("the file ends inside a scope (%s)" % "::".join(s or "(anonymous)" for s in scopes))
    return found


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+")
    parser.add_argument("--max-lines", type=int, default=80)
    parser.add_argument("--list", type=int, default=0, help="also print the N longest functions")
    args = parser.parse_args(argv)
    files = []
    for folder in args.folders:
        if not os.path.isdir(folder):
            print("check_function_length: %s is not a folder" % folder)
            return 2
        for root, dirs, names in os.walk(folder):
            dirs.sort()
            files += [os.path.join(root, n) for n in sorted(names) if n.endswith(SUFFIXES)]
    all_functions = []
    unreadable = 0
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        try:
            all_functions += [(path, name, first, last) for name, first, last in functions(text)]
        except ValueError as e:
            print("%s: cannot follow the braces: %s" % (path, e))
            unreadable += 1
    too_long = [f for f in all_functions if f[3] - f[2] + 1 > args.max_lines]
    for path, name, first, last in too_long:
        print("%s:%d: %s has %d lines (limit %d): split it where the pieces have names" %
              (path, first, name, last - first + 1, args.max_lines))
    if args.list:
        for path, name, first, last in sorted(all_functions, key=lambda f: f[2] - f[3])[:args.list]:
            print("%5d  %s (%s:%d)" % (last - first + 1, name, path, first))
    print("check_function_length: %d functions in %d files, %d over %d lines%s" %
          (len(all_functions), len(files), len(too_long), args.max_lines,
           ", %d files unreadable" % unreadable if unreadable else ""))
    if unreadable:
        return 2
    return 1 if too_long else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
