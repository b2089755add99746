"""Making TLS keys and certificates with the ``cryptography`` package: a development CA and a server certificate
signed by it (``pocketmq tls dev-cert``), and the self-signed certificate a server makes for itself at each start
when TLS is on without certificate files (as RocketMQ's test mode does).

Keys are EC P-256 (fast to make, small handshakes). Server certificates name ``localhost`` and ``127.0.0.1``
(and whatever else the caller asks for) as subject alternative names: the official gRPC clients check the name
they dialled against them, an IP address against an IP SAN. They are good for both server and client
authentication, so a broker can present its own certificate to a peer that asks for one (mutual TLS).

Everything comes back as PEM bytes; writing files is the caller's business. Lives in ``runtime`` because it
reads the wall clock (validity) and the system's randomness (keys, serial numbers).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_SERVER_NAMES = ("localhost", "127.0.0.1")
CA_VALIDITY_DAYS = 3650
SERVER_VALIDITY_DAYS = 825  # the longest that common TLS clients accept for a server certificate
_CLOCK_SKEW = datetime.timedelta(minutes=5)  # valid a little before now: peers whose clock lags accept it


@dataclass(frozen=True)
class KeyAndCertificate:
    """A private key (PKCS#8 PEM, unencrypted) and its certificate (PEM)."""

    key_pem: bytes
    cert_pem: bytes


def make_ca(common_name: str = "PocketMQ development CA") -> KeyAndCertificate:
    """A self-signed certificate authority for signing development server and client certificates."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    builder = (
        _builder(name, name, key.public_key(), CA_VALIDITY_DAYS)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    cert = builder.sign(key, hashes.SHA256())
    return KeyAndCertificate(_key_pem(key), cert.public_bytes(serialization.Encoding.PEM))


def make_server_certificate(
    ca: KeyAndCertificate | None,
    names: tuple[str, ...] = DEFAULT_SERVER_NAMES,
    common_name: str = "pocketmq",
) -> KeyAndCertificate:
    """A certificate for ``names`` (host names and IP addresses), signed by ``ca``, or self-signed when ``ca`` is
    None. Usable as a server and as a client certificate."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    if ca is None:
        issuer, signing_key = subject, key
    else:
        ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
        issuer = ca_cert.subject
        signing_key = serialization.load_pem_private_key(ca.key_pem, password=None)  # type: ignore[assignment]
    builder = (
        _builder(subject, issuer, key.public_key(), SERVER_VALIDITY_DAYS)
        .add_extension(x509.SubjectAlternativeName([_general_name(n) for n in names]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
    )
    cert = builder.sign(signing_key, hashes.SHA256())
    return KeyAndCertificate(_key_pem(key), cert.public_bytes(serialization.Encoding.PEM))


def _builder(subject: x509.Name, issuer: x509.Name, public_key, validity_days: int) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW)
        .not_valid_after(now + datetime.timedelta(days=validity_days))
    )


def _general_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
