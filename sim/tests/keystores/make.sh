#!/usr/bin/env bash
# Writes the keystores the TLS tests read, in the forms Kafka's brokers are
# given them, by the tools that write them in the field: OpenSSL (PEM,
# encrypted PKCS #8, PKCS #12, legacy PKCS #12) and Java's keytool (PKCS #12
# key and trust stores, JKS). Certificates last a century, so the files
# need not be made again; run from this directory to remake them.
# Test material only: every password is written here.
set -euo pipefail
cd "$(dirname "$0")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
days=36500

# The authority (X.509 v3, as rustls requires of every certificate).
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/ca.key" -out ca.pem \
    -days $days -subj "/O=Acme/CN=Keystore test CA" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign

issue() { # NAME SUBJECT EXTENSIONS
    openssl req -newkey rsa:2048 -nodes -keyout "$work/$1.key" -out "$work/$1.csr" -subj "$2"
    printf '%s\n' "$3" > "$work/$1.ext"
    openssl x509 -req -in "$work/$1.csr" -CA ca.pem -CAkey "$work/ca.key" -CAcreateserial \
        -days $days -extfile "$work/$1.ext" -out "$work/$1.crt"
    rm -f ca.srl
}
issue broker "/O=Acme/CN=broker" \
    "subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth"
issue client "/O=Acme/OU=payments/CN=client-1" "extendedKeyUsage=clientAuth"

# PEM (ssl.keystore.type=PEM): the chain, the key plain and encrypted.
cat "$work/broker.crt" ca.pem > broker.pem
openssl pkcs8 -topk8 -nocrypt -in "$work/broker.key" -out broker.key
openssl pkcs8 -topk8 -v2 aes-256-cbc -passout pass:key-secret -in "$work/broker.key" \
    -out broker-aes.key
openssl pkcs8 -topk8 -v2 des3 -passout pass:key-secret -in "$work/broker.key" \
    -out broker-des3.key
cp "$work/client.crt" client.pem
openssl pkcs8 -topk8 -nocrypt -in "$work/client.key" -out client.key

# PKCS #12 (ssl.keystore.type=PKCS12): OpenSSL 3's default (AES-256,
# HMAC-SHA-256), its legacy form (RC2 and 3DES, HMAC-SHA-1), and keytool's.
openssl pkcs12 -export -name broker -inkey broker.key -in "$work/broker.crt" -certfile ca.pem \
    -passout pass:store-secret -out broker-openssl.p12
openssl pkcs12 -export -legacy -name broker -inkey broker.key -in "$work/broker.crt" \
    -certfile ca.pem -passout pass:store-secret -out broker-legacy.p12
rm -f broker-keytool.p12 broker.jks truststore-keytool.p12
keytool -importkeystore -noprompt -srckeystore broker-openssl.p12 -srcstoretype pkcs12 \
    -srcstorepass store-secret -destkeystore broker-keytool.p12 -deststoretype pkcs12 \
    -deststorepass store-secret
keytool -importkeystore -noprompt -srckeystore broker-openssl.p12 -srcstoretype pkcs12 \
    -srcstorepass store-secret -destkeystore broker.jks -deststoretype jks \
    -deststorepass store-secret 2>/dev/null

# Trust stores (ssl.truststore.type=PKCS12): keytool's trusted entry, and
# OpenSSL's certificate without a key.
keytool -importcert -noprompt -alias ca -file ca.pem -keystore truststore-keytool.p12 \
    -storetype pkcs12 -storepass trust-secret
openssl pkcs12 -export -nokeys -in ca.pem -passout pass:trust-secret -out truststore-openssl.p12
