"""A throwaway certificate authority for every TLS test (our servers, a TLS Prometheus): CA, server and client
certificates, made with `cryptography` in a test's tmp_path (never a file outside it)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import bcrypt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DAY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


_CA_USAGE = x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                          data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                          encipher_only=False, decipher_only=False)


def _general_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


class TestCA:
    """Issues certificates signed by one fresh CA key; files land in `root`."""

    __test__ = False  # not a pytest test class

    def __init__(self, root: Path, name: str = "test-ca") -> None:
        self.root = root
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self.certificate = (
            x509.CertificateBuilder().subject_name(_name(name)).issuer_name(_name(name))
            .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - DAY).not_valid_after(now + DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(_CA_USAGE, critical=True)
            .sign(self.key, hashes.SHA256()))
        self.cert = root / f"{name}.crt"
        self.cert.write_bytes(self.certificate.public_bytes(serialization.Encoding.PEM))

    def issue(self, common_name: str, server: bool = True, stem: str | None = None,
              names: tuple[str, ...] = ("localhost", "127.0.0.1")) -> Issued:
        """A certificate for `common_name`; a server certificate is valid for `names` (DNS names or IPs)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder().subject_name(_name(common_name)).issuer_name(self.certificate.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - DAY).not_valid_after(now + DAY)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName([_general_name(n) for n in names]),
                                            critical=False)
        certificate = builder.sign(self.key, hashes.SHA256())
        stem = stem or common_name
        issued = Issued(self.root / f"{stem}.crt", self.root / f"{stem}.key")
        issued.cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
        issued.key.write_bytes(pem)
        return issued


def bcrypt_hash(password: str) -> str:
    """What `htpasswd -nBC 10` writes after the colon (cost 10; $2b$ rather than $2y$, both accepted)."""
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(10)).decode()


def serial_of(der: bytes) -> int:
    """The serial number of a DER certificate, as `SSLSocket.getpeercert(binary_form=True)` returns it."""
    return x509.load_der_x509_certificate(der).serial_number
