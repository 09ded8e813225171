"""Writes a wheel whose metadata and members carry markup and script in every field the web UI
shows (the XSS test of test/ui/), with a nested tar.gz and a text member longer than one preview
page. Usage: xss-wheel.py OUTDIR NAME VERSION; prints the wheel's path."""
import base64, hashlib, io, os, sys, tarfile, zipfile

out, name, version = sys.argv[1:4]
payloads = [
    '<script>window.__xss=1</script>',
    '<img src=x onerror="window.__xss=1">',
    '"><svg onload="window.__xss=1">',
    "javascript:window.__xss=1",
]
p = ' '.join(payloads)
module = name.replace('-', '_')
dist_info = f'{module}-{version}.dist-info'
metadata = f"""Metadata-Version: 2.1
Name: {name}
Version: {version}
Summary: {p}
Home-page: javascript:window.__xss=1
Author: {p}
Author-email: {payloads[1]} <x@example.com>
Keywords: {p}
Project-URL: {payloads[0]}, javascript:window.__xss=1
Classifier: Programming Language :: Python :: 3
Requires-Python: >=3.8
Description-Content-Type: text/markdown

# {payloads[0]}
{p}
"""
nested = io.BytesIO()
with tarfile.open(fileobj=nested, mode='w:gz') as t:
    readme = b'tool 1.0: a vendored archive inside the wheel\n'
    info = tarfile.TarInfo('tool-1.0/README.txt')
    info.size = len(readme)
    t.addfile(info, io.BytesIO(readme))
# More than one 1 MiB preview page, ending with a line the second page shows.
big = ''.join(f'line {i:07d} of a long text member\n' for i in range(40000)) + 'THE LAST LINE\n'
files = {
    f'{module}/__init__.py': f'"""{p}"""\n'.encode(),
    f'{module}/vendor/tool-1.0.tar.gz': nested.getvalue(),
    f'{module}/big.txt': big.encode(),
    f'{module}/<img src=x onerror=window.__xss=1>.txt': p.encode(),
    f'{dist_info}/METADATA': metadata.encode(),
    f'{dist_info}/WHEEL': b'Wheel-Version: 1.0\nGenerator: velodex-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n',
}
record = ''.join(f'{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()},{len(data)}\n' for path, data in files.items())
record += f'{dist_info}/RECORD,,\n'
path = os.path.join(out, f'{module}-{version}-py3-none-any.whl')
with zipfile.ZipFile(path, 'w', zipfile.ZIP_DEFLATED) as z:
    for name_, data in files.items():
        z.writestr(name_, data)
    z.writestr(f'{dist_info}/RECORD', record)
print(path)
