import Testing

/// A PEM key, which a parameterised test names by its fixture rather than prints whole.
struct PEMFixture: Sendable, CustomTestStringConvertible {
    let name: String
    let text: String

    init(_ name: String, _ text: String) {
        self.name = name
        self.text = text
    }

    var testDescription: String { name }
}

/// Keys made once with the openssl tool (OpenSSL 3.0), and what it computed with them.
///
/// Test keys only: they sign nothing anywhere else.
enum Fixtures {
    /// `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`: PKCS #8, as an APNs `.p8`.
    static let p256PKCS8 = PEMFixture(
        "p256PKCS8",
        """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgw+oAhSf6y8u3wuZj
        X791DVeYJsUuELI8ZMRqxHI8UrqhRANCAARF0uj8TeQ/zOQnmGoapazZZ+r4V5FR
        H6VT/2MONC6KBIgdu4YN4YeBD94DZ9jTioTluUjPvIlH1mlS5sML8a6L
        -----END PRIVATE KEY-----
        """
    )

    /// The same key in SEC 1 form: `openssl ec -in p256.pem`.
    static let p256SEC1 = PEMFixture(
        "p256SEC1",
        """
        -----BEGIN EC PRIVATE KEY-----
        MHcCAQEEIMPqAIUn+svLt8LmY1+/dQ1XmCbFLhCyPGTEasRyPFK6oAoGCCqGSM49
        AwEHoUQDQgAERdLo/E3kP8zkJ5hqGqWs2Wfq+FeRUR+lU/9jDjQuigSIHbuGDeGH
        gQ/eA2fY04qE5blIz7yJR9ZpUubDC/Guiw==
        -----END EC PRIVATE KEY-----
        """
    )

    /// The same key in SEC 1 form with its point compressed: `openssl ec -conv_form compressed`.
    static let p256SEC1Compressed = PEMFixture(
        "p256SEC1Compressed",
        """
        -----BEGIN EC PRIVATE KEY-----
        MFcCAQEEIMPqAIUn+svLt8LmY1+/dQ1XmCbFLhCyPGTEasRyPFK6oAoGCCqGSM49
        AwEHoSQDIgADRdLo/E3kP8zkJ5hqGqWs2Wfq+FeRUR+lU/9jDjQuigQ=
        -----END EC PRIVATE KEY-----
        """
    )

    /// Another P-256 key as `openssl ecparam -name prime256v1 -genkey` writes it: EC PARAMETERS first.
    static let p256WithParameters = PEMFixture(
        "p256WithParameters",
        """
        -----BEGIN EC PARAMETERS-----
        BggqhkjOPQMBBw==
        -----END EC PARAMETERS-----
        -----BEGIN EC PRIVATE KEY-----
        MHcCAQEEINxEdtLggD5vespTEQ4caoY2EGWI59vAfVMmoI+GzvrCoAoGCCqGSM49
        AwEHoUQDQgAE7V7IVM+xlHxJXalzyqiT6/YH2QxSg9xked18vjJSQnCtA3z5S+vE
        p8JW50Ha6tdVArc91NzVgrVQnrF1G1o9UQ==
        -----END EC PRIVATE KEY-----
        """
    )

    /// The public half of `p256PKCS8`: `openssl pkey -pubout`.
    static let p256Public = PEMFixture(
        "p256Public",
        """
        -----BEGIN PUBLIC KEY-----
        MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAERdLo/E3kP8zkJ5hqGqWs2Wfq+FeR
        UR+lU/9jDjQuigSIHbuGDeGHgQ/eA2fY04qE5blIz7yJR9ZpUubDC/Guiw==
        -----END PUBLIC KEY-----
        """
    )

    /// `p256PKCS8` encrypted with the passphrase "secret": `openssl pkcs8 -topk8`.
    static let p256Encrypted = PEMFixture(
        "p256Encrypted",
        """
        -----BEGIN ENCRYPTED PRIVATE KEY-----
        MIHsMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAgneYz08ez+NAICCAAw
        DAYIKoZIhvcNAgkFADAdBglghkgBZQMEASoEEAXBYULsEGrVu7C+pePpf3QEgZDN
        oJEt0St1G2v5uP6nZfEZiMVl72vW16WzSlUgnz00HSL9I63UOpEhm4RQDpyEZn19
        xlw4OxRkgNcEnTl/encvRzHq+0ZgQSiCL53HSe1yhivb9JVKo/nCaE27dwWsG+2S
        84Gil4rLRF53oHNzUaoorz131JSPvutZ9/FP5qY6zv65qYRiBjLj8jSiEqPwKss=
        -----END ENCRYPTED PRIVATE KEY-----
        """
    )

    /// `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-384`.
    static let p384 = PEMFixture(
        "p384",
        """
        -----BEGIN PRIVATE KEY-----
        MIG2AgEAMBAGByqGSM49AgEGBSuBBAAiBIGeMIGbAgEBBDDKlmPWRXdh10XlndzB
        tfLtTmCli242uYWkN+B3klBmOCPeAGlg9shR2eREBcQIwwShZANiAARjDgZVvOHc
        Q6QRLSErlvszerZc8Uj0L540T7CAY3498eWqWaq7LHsGzgWbL3CMKMQJTu+hIZ6v
        dhiUvXJCP9UeZ69lZNXV8+HVKNhMB+ThfLKs4XVmaAFuGodSNc/o8ys=
        -----END PRIVATE KEY-----
        """
    )

    /// `openssl genpkey -algorithm ED25519`.
    static let ed25519 = PEMFixture(
        "ed25519",
        """
        -----BEGIN PRIVATE KEY-----
        MC4CAQAwBQYDK2VwBCIEIGgLKTQfRxsgip2WGstD+1qo4riwNtG5MWCjZKU3jxtS
        -----END PRIVATE KEY-----
        """
    )

    /// `openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048`: PKCS #8, as a service account's `private_key`.
    static let rsaPKCS8 = PEMFixture(
        "rsaPKCS8",
        """
        -----BEGIN PRIVATE KEY-----
        MIIEvAIBADANBgkqhkiG9w0BAQEFAASCBKYwggSiAgEAAoIBAQCgXQOElRaXwq4+
        M7Rj/AW6VgeCOYQEJixAodb6Dk1C+W7UDzhmhqsKxWnaFo3/dZXNCDjgNmQP0S8g
        iLCh7WYwEL26UlRE7xERspEXEuUfNWF/RIUcqIS2mtzKr1tEHy4jdXiChMr4e/fy
        mlYIlgEt6yhdTbonv80YKxg2EG7wPirP1s9wm3D3Vvz9OgwlckcY2fg+jP2KBeUb
        vwB/ROQ247zLi4fXNf205TjMZcVy2NPuVtKCa5S1Nqm+ZOeYwcAn8NUUn3Vksn5l
        OrygXilr3TuCjX02+Brs6TjMrdlKeSqHkE1MKkBuACBYIjKYoTH1jGDApVLTcbx/
        XZD/+ZKLAgMBAAECggEADJ5/04k8imZeT3RtJRMPdlQlFMkm4Na008SIhgvlu41P
        py39b7VNigmdOfVdaOAIEObX5u47czKFsAc28xRwiVFqmgS22efVeDGM5lEX05wK
        lzkSn9MzrP+Zu/S5ogOGyMaKhvwhJsBGnizT9AADNBRVtvs8rg+9+WwRZIES4c0Q
        A5t8bCm+MRENGmCsa7bP1+4Wg2eplMtg3RWWh7b9OKWTcLBX3JEjXx+ZO198kGsg
        479rfc2CiZ80F6xY8fyp7RFUSNj7rsWIYemeRSzlBVJLDDuSl8Pgb1j4Kv6qmxgc
        +QEQgsq7j2E3Cu+PvSykJqy2vX/UeT249jyVMhPbNQKBgQDKoepze4srC7oBcQ9Z
        p9afGEvgSEV9oiZ/GmZzMgd5iJraSwBAzFIMllv79j6yh+7SOJ8h/sUehQY3NRm6
        xRwXpeSZWRH5h5KhU8x5xjiTkUxBqXCzNIHOWEFYTfXx4tO+Ip8EIQqv9QN4mgBQ
        ofuEvRyMgOeop9qADrMzMEP1lwKBgQDKmS+xpPyQq6xtvSOd9kMhHGXlhSzE9Oey
        bWfTt5NL595WUriJwSJXi8clPhhzKlXzCggcRVo2/Yt51Mgx6i2XrUvLxRY03czq
        kqJqQn1OMkwOy3SgekCcuJdjNM4L5uL3ClLPecYFkSXVzyD2xG8wcZqF/37Sf7yf
        COZb/daxLQKBgCbMzDziqipK64n9IShUuAbsuxKuJAhDdUWfQ4DJUp8V5jjoZZsC
        xK8+V0yuwSCkYLmGOAplY09Nv3vwwgV+Wru4e0ZVxNhX+l7D0gJ7TzgKeWSVUkwu
        QLDHO3PyMabofQ0KShKbVRWOP+Tm8CqAac3n/EB3KmSkB3W/2tZxZoHvAoGATeCk
        nLy2+UWEeoqB7m6DT28DHD8c/njFt6imiJPAYyU2KiiSFyHOeaiZXI+KBnr3nvz0
        MSnXi9vaiXJpogZKkEtlH2cbKic4ZdMH66CzWiOraOR8aFOWEqhCSTg7HAgcpqmp
        O2er3uf0i0ObgD/yHcUNiQS1U2UWtGtPYX0p0eECgYBE1K39+EUNi550wUhnMUS4
        enfKMWYmin6JuOVVMqQDY3JoW1rLdtiEiJyXGZj5hWiNC1prOnSHD/1bIK1OOz0D
        L+O6Owz2RQgPx3Bb9pwiSPWjRKhGj/LclB95iSC80FOiGAVPn2Mk/iFlItrkrwhO
        H9Qu+4RKfDhIZ4WNhJQOLg==
        -----END PRIVATE KEY-----
        """
    )

    /// The same key in PKCS #1 form: `openssl pkey -traditional`.
    static let rsaPKCS1 = PEMFixture(
        "rsaPKCS1",
        """
        -----BEGIN RSA PRIVATE KEY-----
        MIIEogIBAAKCAQEAoF0DhJUWl8KuPjO0Y/wFulYHgjmEBCYsQKHW+g5NQvlu1A84
        ZoarCsVp2haN/3WVzQg44DZkD9EvIIiwoe1mMBC9ulJURO8REbKRFxLlHzVhf0SF
        HKiEtprcyq9bRB8uI3V4goTK+Hv38ppWCJYBLesoXU26J7/NGCsYNhBu8D4qz9bP
        cJtw91b8/ToMJXJHGNn4Poz9igXlG78Af0TkNuO8y4uH1zX9tOU4zGXFctjT7lbS
        gmuUtTapvmTnmMHAJ/DVFJ91ZLJ+ZTq8oF4pa907go19Nvga7Ok4zK3ZSnkqh5BN
        TCpAbgAgWCIymKEx9YxgwKVS03G8f12Q//mSiwIDAQABAoIBAAyef9OJPIpmXk90
        bSUTD3ZUJRTJJuDWtNPEiIYL5buNT6ct/W+1TYoJnTn1XWjgCBDm1+buO3MyhbAH
        NvMUcIlRapoEttnn1XgxjOZRF9OcCpc5Ep/TM6z/mbv0uaIDhsjGiob8ISbARp4s
        0/QAAzQUVbb7PK4PvflsEWSBEuHNEAObfGwpvjERDRpgrGu2z9fuFoNnqZTLYN0V
        loe2/Tilk3CwV9yRI18fmTtffJBrIOO/a33NgomfNBesWPH8qe0RVEjY+67FiGHp
        nkUs5QVSSww7kpfD4G9Y+Cr+qpsYHPkBEILKu49hNwrvj70spCastr1/1Hk9uPY8
        lTIT2zUCgYEAyqHqc3uLKwu6AXEPWafWnxhL4EhFfaImfxpmczIHeYia2ksAQMxS
        DJZb+/Y+sofu0jifIf7FHoUGNzUZusUcF6XkmVkR+YeSoVPMecY4k5FMQalwszSB
        zlhBWE318eLTviKfBCEKr/UDeJoAUKH7hL0cjIDnqKfagA6zMzBD9ZcCgYEAypkv
        saT8kKusbb0jnfZDIRxl5YUsxPTnsm1n07eTS+feVlK4icEiV4vHJT4YcypV8woI
        HEVaNv2LedTIMeotl61Ly8UWNN3M6pKiakJ9TjJMDst0oHpAnLiXYzTOC+bi9wpS
        z3nGBZEl1c8g9sRvMHGahf9+0n+8nwjmW/3WsS0CgYAmzMw84qoqSuuJ/SEoVLgG
        7LsSriQIQ3VFn0OAyVKfFeY46GWbAsSvPldMrsEgpGC5hjgKZWNPTb978MIFflq7
        uHtGVcTYV/pew9ICe084CnlklVJMLkCwxztz8jGm6H0NCkoSm1UVjj/k5vAqgGnN
        5/xAdypkpAd1v9rWcWaB7wKBgE3gpJy8tvlFhHqKge5ug09vAxw/HP54xbeopoiT
        wGMlNiookhchznmomVyPigZ695789DEp14vb2olyaaIGSpBLZR9nGyonOGXTB+ug
        s1ojq2jkfGhTlhKoQkk4OxwIHKapqTtnq97n9ItDm4A/8h3FDYkEtVNlFrRrT2F9
        KdHhAoGARNSt/fhFDYuedMFIZzFEuHp3yjFmJop+ibjlVTKkA2NyaFtay3bYhIic
        lxmY+YVojQtaazp0hw/9WyCtTjs9Ay/jujsM9kUID8dwW/acIkj1o0SoRo/y3JQf
        eYkgvNBTohgFT59jJP4hZSLa5K8ITh/ULvuESnw4SGeFjYSUDi4=
        -----END RSA PRIVATE KEY-----
        """
    )

    /// `openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:1024`: too short for RS256.
    static let rsa1024 = PEMFixture(
        "rsa1024",
        """
        -----BEGIN PRIVATE KEY-----
        MIICdwIBADANBgkqhkiG9w0BAQEFAASCAmEwggJdAgEAAoGBANgRAfIS9IkNO5EE
        UkBJof3JS+eGlq2WeDxn++0SWnDo6MGUqDqWU2U1cChEM1DI8KgxA7yL1VUPr8t4
        +u9VGYziU7IrM9QSSAxEiB/HOQm3D2FXeVFv46HVUyxjNdpgDNXQYMUbkFq6VPrf
        xjISmCwAlKkrtVXZUfkpbVBHk57vAgMBAAECgYAN2aE/TDnCo0eDNzyyhEXPB91G
        vRjhjbitXpkGjFuhyzxIVGgoQUSdQzyqSBzl+8t5bJLpvijxp+zD5UBooRLfF+QB
        JBiuJAz/q3yLXr260V1VapXzBmk7vry8ZLNn8XMm7ZdjttH/VNwfeVU211beao1o
        RvcT+IE1YRylIB0HIQJBAPLtJfp6VTWRtkwYAkmUMUyo9YPG/6qLC1qENS6othFT
        7DU9zPfrFNMyj0v0iu00HsyjPRwuPpW435MypwWfw/ECQQDjsc3QdCJAw4Py8MOH
        cuc3wGD8IxQE09sJX69k04v4u7FQprLHdtRDLxMwkfZU4QzPxZ5AMgaIFM+WtxTz
        FvDfAkEAmS/ghh4Eg55aNYviTWHM4Mme4LVpXbMGutKp8r1i6nRgfIZ3LVMps7Cr
        WjtgLAp07Zh2ncGvp5yIJ/uGBW7lEQJATD8sRpO9LKbMNrw9HcxydQ7s60Hr4Dn5
        bUgnecIFa0Oe+vz3fSfjqKPI70jRjlbWbXUlqyWVXlhps3SXhVe3TQJBANR1Gt+5
        DMeWnI9zjTh1zoUjcWoyxrVsrhk3v9cxjkJcHch2GF/9HduluH8QrJJlS0dr7jSR
        VDWoPeqBJuAC414=
        -----END PRIVATE KEY-----
        """
    )

    /// The header of `rs256Token`.
    static let rs256Header = #"{"alg":"RS256","typ":"JWT"}"#
    /// The claims of `rs256Token`: FCM's OAuth grant for a service account.
    static let rs256Claims = [
        #"{"iss":"chime@example.iam.gserviceaccount.com","#,
        #""scope":"https://www.googleapis.com/auth/firebase.messaging","#,
        #""aud":"https://oauth2.googleapis.com/token","iat":1700000000,"exp":1700003600}"#,
    ].joined()
    /// A JWT signed with `rsaPKCS8` by the openssl tool: the signing input (the first two parts)
    /// in `si.txt`, then `openssl dgst -sha256 -sign rsa.pem si.txt`, base64url. PyJWT verifies it
    /// with the key's public half.
    static let rs256Token = [
        "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.",
        "eyJpc3MiOiJjaGltZUBleGFtcGxlLmlhbS5nc2VydmljZWFjY291bnQuY29tIiwic2NvcGUiOiJodHRwczovL3d3dy5nb29nbGVh",
        "cGlzLmNvbS9hdXRoL2ZpcmViYXNlLm1lc3NhZ2luZyIsImF1ZCI6Imh0dHBzOi8vb2F1dGgyLmdvb2dsZWFwaXMuY29tL3Rva2Vu",
        "IiwiaWF0IjoxNzAwMDAwMDAwLCJleHAiOjE3MDAwMDM2MDB9.",
        "IzYFoMfWEYNiMUfktb1Bqx4_w8gzw1ndJRgvO_LgAXV7qGVDpMjYNXuDsW0yMHl7n-ZSUGJ8S7in6w-XWTq59eQ7z_hQCLh3Pwl5",
        "4YoKSq2bHCXj0QM6JnbNNyR-5PCP-8iz_t6nvCX5EYqW1wOlwuMkEpVmvSX-RLNmtvRWuJqoIoAZv4bmv2vcIgAhaWtKb6HbgMM0",
        "k17fvPZ568wkK7_s3lwLiodepPBQSXbmlWMP2TCkZplv_3tN6S2hYQ8ukO37NlUpffnxIt2dYRM9-C5GMAcO3f8XVImRiQWxP-2f",
        "o2m3nLHJz51bdh6Aeog1vGRnrY3GCUWlOihB0ItBrA",
    ].joined()
}

extension Fixtures {
    /// The public key of `p256PKCS8`, uncompressed, as Python's cryptography writes it.
    static let p256PublicKey = "BEXS6PxN5D_M5CeYahqlrNln6vhXkVEfpVP_Yw40LooEiB27hg3hh4EP3gNn2NOKhOW5SM-8iUfWaVLmwwvxros"
    /// The public key of `p256WithParameters`.
    static let p256WithParametersPublicKey =
        "BO1eyFTPsZR8SV2pc8qok-v2B9kMUoPcZHndfL4yUkJwrQN8-UvrxKfCVudB2urXVQK3PdTc1YK1UJ6xdRtaPVE"
    /// `openssl dgst -sha256 -sign p256.pem` of `es256Message`, its DER turned into r and s.
    static let es256Message = "Chime ES256 check"
    static let es256Signature =
        "iiNaVpwcbPP6u4DOc6kYfl59GGUJfI4EV_-7OJokFJPZST-nGrjZwyWIjdieY44CWlXT6yukmtOsV9jtYPNJAA"
}

/// RFC 8291 appendix A: the example message, its keys and the values derived on the way.
enum RFC8291 {
    static let plaintext = "When I grow up, I want to be a watermelon"
    static let applicationServerPrivateKey = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
    static let applicationServerPublicKey =
        "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
    static let userAgentPrivateKey = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
    static let userAgentPublicKey =
        "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
    static let salt = "DGv6ra1nlYgDCS1FRnbzlw"
    static let authSecret = "BTBZMqHH6r4Tts7J_aSIgg"
    static let ecdhSecret = "kyrL1jIIOHEzg3sM2ZWRHDRB62YACZhhSlknJ672kSs"
    /// Section 5: the header (rs 4096) and the one record; Python's http_ece decrypts it.
    static let body = [
        "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27ml",
        "mlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPT",
        "pK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN",
    ].joined()
}
