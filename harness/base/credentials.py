"""What a credential inside a string looks like: one grammar, used by both the refusal at load
(:func:`harness.base.config.convert`: a scenario never carries credentials) and the masking of everything the
harness writes (``harness.results.redact``).

The forms (see ``FORMS``; the kinds are what messages say, never the value):

- a password in a URL's userinfo, ``scheme://user:password@host``, where the password may hold ``/``, ``+``
  and ``=`` (AWS secret keys: ``s3://AKIA...:wJalr/K7MD/bPxR+fi@bucket``); ``host:8333/path@x`` (a port, then
  a path) is not one;
- ``name=value`` where the name ends in a word that says secret after ``_`` or ``-`` (``access_token``,
  ``api_key``, ``X-Amz-Signature``, ``X-Amz-Credential``, ``X-Goog-Signature``, ``client_secret``,
  ``aws_secret_access_key``, ``HF_TOKEN``, ``DB_PASSWORD``: query strings, connection strings, printed
  environments alike), or is such a word alone where it cannot be an ordinary word (``password``, ``pwd``,
  ``AccountKey``, ``SharedAccessSignature``, ``apikey``), or a short one after ``?``, ``&`` or ``;`` (``sig`` of
  Azure SAS, ``token``, ``key``, ``secret``, ``signature``); ``se=`` and ``sp=`` (a SAS's expiry and permissions)
  are not secret and stay; also ``name = value`` (TOML) and ``"name": value`` (JSON, YAML, AWS's files) for
  the names of ``COLON_NAMES``;
- a bearer token (``Bearer eyJ...``) and an ``Authorization:`` header's credentials;
- (issue 52) a password holding what RFC 3986 allows beyond those (``:`` and ``'``, up to 128 characters), a
  token as a URL's whole userinfo (``https://ghp_...@github.com``: 16 characters or more, letters and digits),
  a query parameter whose name ends in a secret's word whatever precedes it (``accessToken``, ``apiKey``,
  ``clientSecret``, ``auth``), also percent-encoded in a URL inside a URL (``%3FX-Amz-Signature%3D...``), and
  a header named ``...-Key``, ``...-Token``, ``...-Secret`` (``X-API-Key: ...``, ``Private-Token: ...``).

A value is masked only when it holds a letter or digit: text that describes a form (``sig=, password=, ...``)
is not a credential and stays as written.

Linear in the text's length, and fast: the scan runs over the text's UTF-8 bytes, lower-cased (ASCII only, so
every offset stays), with patterns that each start with a literal anchor (``://``, ``=``, ``:``, ``bearer``,
``authorization``) followed by fixed-width look-behinds and single runs of one character class: no nested or
overlapping quantifiers, so a failed attempt costs at most the run it scanned, and no two attempts scan the
same run (``benchmarks/credential_scan.py`` measures it; tests/unit/base/test_credentials.py checks it over long
adversarial strings).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

# Words that end a secret's name after "_" or "-" (lower case: the scan is over lower-cased text).
SECRET_WORDS = ("key", "token", "secret", "password", "passwd", "pwd", "sig", "signature", "credential",
                "credentials", "sas", "connection_string")
# Names that are a secret's alone, wherever they stand after a non-name character.
ALONE = ("password", "passwd", "pwd", "accountkey", "sharedaccesskey", "sharedaccesssignature", "apikey",
         "accesskey", "secretkey", "clientsecret", "credentials")
# Short names, a secret's only in a query or connection string (after ?, & or ;).
SHORT = ("sig", "signature", "token", "key", "secret", "sas", "credential")
# Names also written "name: value" (AWS's config files, JSON, YAML) and "name = value" (TOML); "password" only
# quoted ("password": "x"), as a harness message names a key "password: problem".
COLON_NAMES = ("aws_secret_access_key", "aws_session_token", "client_secret", "api_key", "apikey", "access_token",
               "refresh_token", "accountkey", "sharedaccesskey")
QUOTED_COLON_NAMES = ("password", "secret", "token", "secret_key", "private_key")

_DELIMITERS = rb"\s\"'<>`"
_VALUE = rb"[^" + _DELIMITERS + rb"&;]+"  # a query or connection string's value ends at & or ;
_TOKEN = rb"[a-z0-9._~+/=-]{8,}"  # RFC 6750's token68, at least 8 characters (lower-cased)
# What a query parameter's name may end in to be a secret's, whatever comes before it (camelCase included:
# accessToken, sessionToken, clientSecret, apiKey, X-Amz-Signature, authToken).
QUERY_WORDS = ("token", "key", "secret", "password", "passwd", "pwd", "sig", "signature", "credential",
               "credentials", "sas", "auth")
# Header names ending in one of these after "-" carry a credential (X-API-Key, Private-Token, X-Auth-Token,
# Ocp-Apim-Subscription-Key, X-Goog-Api-Key, X-Vault-Token).
HEADER_WORDS = ("key", "apikey", "token", "secret", "signature", "password")
_PORT_THEN_PATH = rb"(?![0-9]{1,5}(?:[/?#]|$))"


def _after(names: list[str]) -> list[bytes]:
    """Look-behinds (fixed width) that the text just before the current position is one of ``names``, with
    no name character before it."""
    return [b"(?<=" + re.escape(n.encode()) + b")(?<![a-z0-9_.-]" + re.escape(n.encode()) + b")" for n in names]


def _named_patterns() -> tuple[re.Pattern[bytes], ...]:
    """One pattern per secret word, each starting with the word itself (a literal: the regular-expression
    engine finds it with a fast search, and ordinary text holds few), then what must stand before it as
    fixed-width look-behinds, then the separator and the value."""
    patterns = []
    for word in SECRET_WORDS:
        w = word.encode()
        equals = [b"(?<=" + re.escape(sep + w) + b")" for sep in (b"_", b"-")]
        equals += [b"(?<=" + re.escape(p + w) + b")" for p in (b"?", b"&", b";") if word in SHORT]
        equals += _after([n for n in (*ALONE, *COLON_NAMES) if n.endswith(word)])
        colon = _after([n for n in COLON_NAMES if n.endswith(word)])
        quoted = [b"(?<=[\"']" + re.escape(n.encode()) + b")" for n in QUOTED_COLON_NAMES if n.endswith(word)]
        separators = [b"(?:" + b"|".join(equals) + b") ?="]
        if colon:
            separators.append(b"(?:" + b"|".join(colon) + b")[\"']?[ \t]*:")
        if quoted:
            separators.append(b"(?:" + b"|".join(quoted) + b")[\"'][ \t]*:")
        # (?=...): a word followed by no separator (most, in ordinary text) fails on one comparison
        patterns.append(re.compile(re.escape(w) + b"(?=[ =\"':])(?:" + b"|".join(separators) + b")[ \t]*[\"']?(?P<secret>"
                                   + _VALUE + b")"))
    return tuple(patterns)


@dataclass(frozen=True)
class Form:
    kind: str  # what a message says the text holds
    patterns: tuple[re.Pattern[bytes], ...]  # over lower-cased UTF-8; group "secret": what is masked
    accept: str = "alnum"  # which values are secrets: "alnum" (a letter or digit), "token_shaped"


def _words(words: tuple[str, ...]) -> bytes:
    return b"(?:" + b"|".join(re.escape(w.encode()) for w in sorted(words, key=len, reverse=True)) + b")"


_USER = rb"[^" + _DELIMITERS + rb"/@:?#]*"  # a URL's user: one class, ends at ':'
FORMS = (
    Form("a password in a URL (user:password@host)",
         # '://', a user, then a password up to '@'; not a port followed by a path. The second pattern takes
         # what RFC 3986 allows in a password beyond the first (':' and "'"), bounded, so that no run of
         # "://x:" costs more than its 128 characters
         (re.compile(rb"://" + _USER + rb":" + _PORT_THEN_PATH + rb"(?P<secret>[^" + _DELIMITERS + rb"@:]+)@"),
          re.compile(rb"://" + _USER + rb":" + _PORT_THEN_PATH + rb"(?P<secret>[^\s\"<>`@]{1,128})@"))),
    Form("a credential as name=value or \"name\": value (access_token=, api_key=, X-Amz-Signature=, sig=, "
         "AccountKey=, password=, ...)", _named_patterns()),
    Form("a bearer token", (re.compile(rb"bearer[ \t]+(?P<secret>" + _TOKEN + rb")"),)),
    Form("credentials in an Authorization header",
         (re.compile(rb"authorization[\"']?[ \t]*[:=][ \t]*[\"']?(?:[a-z]+[ \t]+)?(?P<secret>" + _TOKEN + rb")"),)),
    Form("a token as a URL's whole user (https://TOKEN@host)",
         # no ':' in the userinfo, 16 characters or more, letters and digits both (token_shaped): not "git@"
         (re.compile(rb"://(?P<secret>[^" + _DELIMITERS + rb"/@:?#]{16,})@"),), accept="token_shaped"),
    Form("a credential in a query string (accessToken=, apiKey=, X-Amz-Signature%3D, ...)",
         # after ?, & or ; (or their percent-encoded %3F, %26, in a URL inside a URL): a name ending in a
         # secret's word (a bounded lazy prefix: an attempt fails within the name, never over a value), then =
         # or %3D
         (re.compile(rb"(?:[?&;]|%3f|%26)[a-z0-9_.-]{0,40}?" + _words(QUERY_WORDS) + rb"(?:=|%3d)(?P<secret>"
                     + _VALUE + rb")"),)),
    Form("credentials in an API-key header (X-API-Key:, Private-Token:, ...)",
         tuple(re.compile(re.escape(w.encode()) + rb"(?<=-" + re.escape(w.encode()) + rb")[\"']?[ \t]*:[ \t]*[\"']?"
                          rb"(?P<secret>[^" + _DELIMITERS + rb",;]{8,})") for w in HEADER_WORDS)),
)
_ALNUM = re.compile(rb"[a-z0-9]")
_ACCEPT = {"alnum": lambda v: _ALNUM.search(v) is not None,
           # a token's shape (ghp_..., a hex or base64 string): letters and digits both
           "token_shaped": lambda v: re.search(rb"[0-9]", v) is not None and re.search(rb"[a-z]", v) is not None}


def _encoded(text: str) -> bytes:
    """``text`` as UTF-8, lone surrogates included (files are read with errors="surrogateescape")."""
    return text.encode("utf-8", "surrogatepass")


def _spans(form: Form, lowered: bytes):
    """The (start, end) byte offsets of the secrets ``form`` finds (values with a letter or digit)."""
    for pattern in form.patterns:
        for match in pattern.finditer(lowered):
            if _ACCEPT[form.accept](match.group("secret")):
                yield match.span("secret")


def secrets_in(text: str) -> list[str]:
    """The credentials ``text`` holds, each as written (to mask them where they appear alone)."""
    raw = _encoded(text)
    lowered = raw.lower()
    return [raw[start:end].decode("utf-8", "surrogatepass") for form in FORMS for start, end in _spans(form, lowered)]


def held_credential(text: str) -> str | None:
    """What kind of credential ``text`` holds (for a message that does not repeat it), or None."""
    lowered = _encoded(text).lower()
    return next((form.kind for form in FORMS if next(_spans(form, lowered), None)), None)


def mask(text: str, masked: str) -> str:
    """``text`` with every credential the forms find replaced by ``masked``."""
    raw = _encoded(text)
    lowered = raw.lower()
    spans = sorted(span for form in FORMS for span in _spans(form, lowered))
    if not spans:
        return text
    out, at, replacement = [], 0, masked.encode()
    for start, end in spans:
        if end <= at:  # inside a secret masked already
            continue
        if start >= at:
            out += [raw[at:start], replacement]
        at = end
    out.append(raw[at:])
    return b"".join(out).decode("utf-8", "surrogatepass")


# ------------------------------------------------------------------ a value alone (issue 52: the value net)

# Tokens of well-known shapes, by their prefix (a value is matched whole, case kept): GitHub's (ghp_, gho_,
# ghu_, ghs_, ghr_, github_pat_), GitLab's (glpat-), Slack's (xoxb- ...), AWS access key ids (AKIA, ASIA),
# Google API keys (AIza), OpenAI and Stripe keys (sk-, sk_live_, rk_live_), Hugging Face's (hf_), npm's, JWTs
KNOWN_SHAPES = re.compile(r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|glpat-[A-Za-z0-9_-]{20,}"
                          r"|xox[abprs]-[A-Za-z0-9-]{10,}|(?:AKIA|ASIA)[A-Z0-9]{16}|AIza[A-Za-z0-9_-]{35}"
                          r"|(?:sk|rk)[-_](?:live_|test_|proj-)?[A-Za-z0-9_-]{20,}|hf_[A-Za-z0-9]{30,}"
                          r"|npm_[A-Za-z0-9]{36}|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)")
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9+/=_.~-]{20,}")
MIN_TOKEN_CHARS = 20  # a value of no known shape must be this long to be taken for a random token
MIN_PIECE_CHARS = 16  # of it without a separator (- _ . ~), letters of both cases and digits in it
MIN_TOKEN_ENTROPY = 3.5  # bits per character (a random base62 string of 20 has about 4.1; English words 2-3)


def looks_like_token(value: str) -> bool:
    """True when ``value`` alone looks like a secret whatever holds it: a token of a well-known shape, or a
    random-looking string (``MIN_TOKEN_CHARS`` or more of base64's and URL-safe characters, a piece of
    ``MIN_PIECE_CHARS`` between separators with upper and lower case letters and digits all, at
    ``MIN_TOKEN_ENTROPY`` bits a character or more). Hex digests and UUIDs
    (one letter case: a commit id, a job id) and paths (``/`` first) are not taken for one."""
    if KNOWN_SHAPES.fullmatch(value):
        return True
    if not _TOKEN_CHARS.fullmatch(value) or value[0] in "/.~":
        return False
    # its longest piece between separators holds all three: a sweep id (20261203T132817Z-ac6edc) does not
    piece = max(re.split(r"[-_.~]", value), key=len)
    if len(piece) < MIN_PIECE_CHARS or not all(re.search(c, piece) for c in ("[a-z]", "[A-Z]", "[0-9]")):
        return False
    counts = [value.count(c) for c in set(value)]
    entropy = -sum(n / len(value) * math.log2(n / len(value)) for n in counts)
    return entropy >= MIN_TOKEN_ENTROPY
