"""Writes a wheel whose metadata and members carry markup and script in every field the web UI
shows (the XSS test of test/ui/). Usage: xss-wheel.py OUTDIR NAME VERSION; prints the wheel's path."""
import base64, hashlib, os, sys, zipfile

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
files = {
    f'{module}/__init__.py': f'"""{p}"""\n'.encode(),
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
